package deploy_test

// The custom resources of the production overlay are not in k8s.io/api. Their projects'
// Go types (github.com/kedacore/keda/v2/apis, github.com/cloudnative-pg/cloudnative-pg/api)
// live in the operators' own modules, whose requirement graphs (controller-runtime, the
// scalers' cloud SDKs, the operator's dependencies) would outweigh everything else this
// module needs, for four objects. So these are local types: each field shipfile uses,
// spelled and typed as in those projects' API types (keda.sh/v1alpha1 ScaledObject,
// postgresql.cnpg.io/v1 Cluster and ScheduledBackup, barmancloud.cnpg.io/v1 ObjectStore),
// reusing k8s.io/api where the projects do. Strict decoding into them fails on any other
// field, so a typo fails the test; a real field not listed yet is added here on purpose.

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ScaledObject is keda.sh/v1alpha1 ScaledObject.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ScaledObjectSpec `json:"spec"`
}

// ScaledObjectSpec is the spec of a ScaledObject.
type ScaledObjectSpec struct {
	ScaleTargetRef        *ScaleTarget   `json:"scaleTargetRef"`
	PollingInterval       *int32         `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32         `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32         `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32         `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32         `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32         `json:"maxReplicaCount,omitempty"`
	Advanced              *KEDAAdvanced  `json:"advanced,omitempty"`
	Triggers              []ScaleTrigger `json:"triggers"`
	Fallback              *ScaleFallback `json:"fallback,omitempty"`
}

// ScaleTarget names the scaled workload.
type ScaleTarget struct {
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	Name                   string `json:"name"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

// KEDAAdvanced tunes the HorizontalPodAutoscaler KEDA makes.
type KEDAAdvanced struct {
	HorizontalPodAutoscalerConfig *HPAConfig `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool       `json:"restoreToOriginalReplicaCount,omitempty"`
}

// HPAConfig is the name and behavior of KEDA's HorizontalPodAutoscaler.
type HPAConfig struct {
	Name     string                                         `json:"name,omitempty"`
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// ScaleTrigger is one scaler.
type ScaleTrigger struct {
	Type              string                         `json:"type"`
	Name              string                         `json:"name,omitempty"`
	UseCachedMetrics  bool                           `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string              `json:"metadata"`
	AuthenticationRef *ScaleTriggerAuth              `json:"authenticationRef,omitempty"`
	MetricType        autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// ScaleTriggerAuth names a TriggerAuthentication.
type ScaleTriggerAuth struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}

// ScaleFallback is the replica count KEDA holds while a scaler fails.
type ScaleFallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}

// PGCluster is postgresql.cnpg.io/v1 Cluster.
type PGCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PGClusterSpec `json:"spec"`
}

// PGClusterSpec is the spec of a CloudNativePG Cluster.
type PGClusterSpec struct {
	Instances             int                          `json:"instances"`
	ImageName             string                       `json:"imageName,omitempty"`
	PrimaryUpdateStrategy string                       `json:"primaryUpdateStrategy,omitempty"`
	EnableSuperuserAccess *bool                        `json:"enableSuperuserAccess,omitempty"`
	Bootstrap             *PGBootstrap                 `json:"bootstrap,omitempty"`
	PostgreSQL            *PGConfiguration             `json:"postgresql,omitempty"`
	Storage               PGStorage                    `json:"storage"`
	WALStorage            *PGStorage                   `json:"walStorage,omitempty"`
	Affinity              *PGAffinity                  `json:"affinity,omitempty"`
	Resources             *corev1.ResourceRequirements `json:"resources,omitempty"`
	Plugins               []PGPlugin                   `json:"plugins,omitempty"`
}

// PGBootstrap says how the cluster starts.
type PGBootstrap struct {
	InitDB *struct {
		Database string `json:"database"`
		Owner    string `json:"owner"`
		Secret   *struct {
			Name string `json:"name"`
		} `json:"secret,omitempty"`
	} `json:"initdb,omitempty"`
}

// PGConfiguration is the PostgreSQL configuration.
type PGConfiguration struct {
	Parameters  map[string]string `json:"parameters,omitempty"`
	Synchronous *struct {
		Method         string `json:"method"`
		Number         int    `json:"number"`
		DataDurability string `json:"dataDurability,omitempty"`
	} `json:"synchronous,omitempty"`
}

// PGStorage is a volume of each instance.
type PGStorage struct {
	Size         string  `json:"size"`
	StorageClass *string `json:"storageClass,omitempty"`
}

// PGAffinity places the instances.
type PGAffinity struct {
	EnablePodAntiAffinity *bool  `json:"enablePodAntiAffinity,omitempty"`
	TopologyKey           string `json:"topologyKey,omitempty"`
	PodAntiAffinityType   string `json:"podAntiAffinityType,omitempty"`
}

// PGPlugin enables a CNPG-I plugin.
type PGPlugin struct {
	Name          string            `json:"name"`
	Enabled       *bool             `json:"enabled,omitempty"`
	IsWALArchiver *bool             `json:"isWALArchiver,omitempty"`
	Parameters    map[string]string `json:"parameters,omitempty"`
}

// ScheduledBackup is postgresql.cnpg.io/v1 ScheduledBackup.
type ScheduledBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Schedule             string `json:"schedule"`
		Immediate            *bool  `json:"immediate,omitempty"`
		Suspend              *bool  `json:"suspend,omitempty"`
		BackupOwnerReference string `json:"backupOwnerReference,omitempty"`
		Cluster              struct {
			Name string `json:"name"`
		} `json:"cluster"`
		Method              string `json:"method,omitempty"`
		PluginConfiguration *struct {
			Name       string            `json:"name"`
			Parameters map[string]string `json:"parameters,omitempty"`
		} `json:"pluginConfiguration,omitempty"`
	} `json:"spec"`
}

// ObjectStore is barmancloud.cnpg.io/v1 ObjectStore (the Barman Cloud plugin's bucket).
type ObjectStore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		RetentionPolicy string `json:"retentionPolicy,omitempty"`
		Configuration   struct {
			DestinationPath string `json:"destinationPath"`
			EndpointURL     string `json:"endpointURL,omitempty"`
			S3Credentials   *struct {
				AccessKeyID     *SecretKeySelector `json:"accessKeyId,omitempty"`
				SecretAccessKey *SecretKeySelector `json:"secretAccessKey,omitempty"`
				Region          *SecretKeySelector `json:"region,omitempty"`
				InheritFromIAM  bool               `json:"inheritFromIAMRole,omitempty"`
			} `json:"s3Credentials,omitempty"`
			WAL *struct {
				Compression string `json:"compression,omitempty"`
				MaxParallel int    `json:"maxParallel,omitempty"`
			} `json:"wal,omitempty"`
			Data *struct {
				Compression string `json:"compression,omitempty"`
				Jobs        *int32 `json:"jobs,omitempty"`
			} `json:"data,omitempty"`
		} `json:"configuration"`
	} `json:"spec"`
}

// SecretKeySelector is a key of a Secret in the same namespace.
type SecretKeySelector struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}
