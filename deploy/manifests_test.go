package deploy_test

import (
	"errors"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// The decoder must be strict, or a typo would pass: each of these differs from a valid
// object by one mistake.
func TestStrictDecodingRejectsTypos(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		into func() any
		yaml string
	}{
		{"misspelled field", func() any { return &appsv1.Deployment{} },
			"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replica: 2}"},
		{"field in the wrong case", func() any { return &appsv1.Deployment{} },
			"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {Replicas: 2}"},
		{"string for a number", func() any { return &appsv1.Deployment{} },
			"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: two}"},
		{"bad quantity", func() any { return &corev1.ResourceRequirements{} },
			"limits: {memory: 1Gb}"},
		{"probe field one level too high", func() any { return &corev1.Container{} },
			"name: x\nreadinessProbe: {path: /readyz}"},
		{"unknown ScaledObject field", func() any { return &ScaledObject{} },
			"apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: x}\nspec: {scaleTargetRef: {name: x}, minReplicas: 1, triggers: []}"},
		{"unknown Cluster field", func() any { return &PGCluster{} },
			"apiVersion: postgresql.cnpg.io/v1\nkind: Cluster\nmetadata: {name: x}\nspec: {instance: 3, storage: {size: 1Gi}}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := yaml.YAMLToJSONStrict([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if err := decodeStrict(j, tt.into()); err == nil {
				t.Errorf("decoded without error:\n%s", tt.yaml)
			}
		})
	}
	// And the same objects without the mistake decode.
	j, _ := yaml.YAMLToJSONStrict([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: 2}"))
	if err := decodeStrict(j, &appsv1.Deployment{}); err != nil {
		t.Errorf("a valid Deployment: %v", err)
	}
	// A duplicate key is refused before decoding.
	if _, err := yaml.YAMLToJSONStrict([]byte("spec: {replicas: 2, replicas: 3}")); err == nil {
		t.Error("a duplicate key passed")
	}
}

// Both kustomizations render, and every object decodes strictly; each holds what it must.
func TestRenderedManifestsDecodeStrictly(t *testing.T) {
	t.Parallel()
	common := []string{
		"Namespace/shipfile", "ServiceAccount/shipfile", "ConfigMap/shipfile", "Job/shipfile-migrate",
		"Deployment/gateway", "Deployment/mailer", "Deployment/expiry", "Deployment/webhooks", "Deployment/scanner",
		"PodDisruptionBudget/gateway", "PodDisruptionBudget/mailer", "PodDisruptionBudget/expiry", "PodDisruptionBudget/webhooks",
		"PodDisruptionBudget/scanner", "StatefulSet/clamav", "Service/clamav",
		"Service/gateway", "Ingress/gateway", "Ingress/gateway-ops-paths",
	}
	tests := []struct {
		dir           string
		want, wantNot []string
	}{
		{baseDir, append(slices.Clone(common), "HorizontalPodAutoscaler/webhooks"),
			[]string{"ScaledObject/webhooks", "Cluster/shipfile-db"}},
		{productionDir, append(slices.Clone(common), "ScaledObject/webhooks", "Cluster/shipfile-db",
			"ObjectStore/shipfile-db-backups", "ScheduledBackup/shipfile-db-nightly"),
			// KEDA makes its own HPA; a second one on the same Deployment would fight it.
			[]string{"HorizontalPodAutoscaler/webhooks"}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			d := rendered(t, tt.dir)
			for _, w := range tt.want {
				if _, ok := d.typed[w]; !ok {
					t.Errorf("%s is not rendered", w)
				}
			}
			for _, w := range tt.wantNot {
				if _, ok := d.typed[w]; ok {
					t.Errorf("%s is rendered", w)
				}
			}
			for _, o := range d.objects {
				if o.Kind == "Namespace" {
					continue
				}
				var meta struct {
					Metadata struct {
						Namespace string            `json:"namespace"`
						Labels    map[string]string `json:"labels"`
					} `json:"metadata"`
				}
				if err := yaml.Unmarshal(o.JSON, &meta); err != nil {
					t.Fatal(err)
				}
				if meta.Metadata.Namespace != "shipfile" {
					t.Errorf("%s is in namespace %q, want shipfile", o, meta.Metadata.Namespace)
				}
				if meta.Metadata.Labels["app.kubernetes.io/part-of"] != "shipfile" {
					t.Errorf("%s lacks the label app.kubernetes.io/part-of=shipfile", o)
				}
			}
		})
	}
}

// envOf returns a container's env as name → literal value ("" for valueFrom).
func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// No Secret is rendered: every credential comes from a Secret made outside this
// repository, by reference, and none sits in a ConfigMap or a literal env value.
func TestSecretsAreReferencedNeverInlined(t *testing.T) {
	t.Parallel()
	src := sources(t)
	if len(src.secrets) < 4 {
		t.Fatalf("found %d secret variables in the code, want the database URL, S3 and SMTP ones", len(src.secrets))
	}
	for _, dir := range []string{baseDir, productionDir} {
		t.Run(dir, func(t *testing.T) {
			d := rendered(t, dir)
			for _, o := range d.objects {
				if o.Kind == "Secret" {
					t.Errorf("%s is rendered: secrets are referenced, never inlined", o)
				}
			}
			cm := d.get("ConfigMap", "shipfile").(*corev1.ConfigMap)
			for k, v := range cm.Data {
				if !src.secrets[k] {
					continue
				}
				// The NATS URL is masked in logs because it may carry a password; in the
				// ConfigMap it must not.
				if k == "SHIPFILE_NATS_URL" {
					for _, u := range strings.Split(v, ",") {
						if p, err := url.Parse(strings.TrimSpace(u)); err != nil || p.User != nil {
							t.Errorf("ConfigMap: SHIPFILE_NATS_URL entry %q carries user info (or does not parse: %v); move it to the Secret", u, err)
						}
					}
					continue
				}
				t.Errorf("ConfigMap holds the secret %s", k)
			}
			var pods []struct {
				name string
				spec corev1.PodSpec
			}
			for _, dep := range all[appsv1.Deployment](d) {
				pods = append(pods, struct {
					name string
					spec corev1.PodSpec
				}{"Deployment/" + dep.Name, dep.Spec.Template.Spec})
			}
			for _, job := range all[batchv1.Job](d) {
				pods = append(pods, struct {
					name string
					spec corev1.PodSpec
				}{"Job/" + job.Name, job.Spec.Template.Spec})
			}
			for _, p := range pods {
				for _, c := range p.spec.Containers {
					for _, e := range c.Env {
						if !src.secrets[e.Name] {
							continue
						}
						if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name == "" || e.ValueFrom.SecretKeyRef.Key == "" {
							t.Errorf("%s: %s is not taken from a Secret by key", p.name, e.Name)
						}
					}
					for _, ef := range c.EnvFrom {
						if ef.SecretRef != nil {
							t.Errorf("%s: envFrom a whole Secret: name each key instead", p.name)
						}
					}
				}
			}
		})
	}
}

// Every ConfigMap key is a variable some service reads, with a value it accepts.
func TestConfigMapVariables(t *testing.T) {
	t.Parallel()
	src := sources(t)
	for _, dir := range []string{baseDir, productionDir} {
		t.Run(dir, func(t *testing.T) {
			cm := rendered(t, dir).get("ConfigMap", "shipfile").(*corev1.ConfigMap)
			keys := make([]string, 0, len(cm.Data))
			for k := range cm.Data {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if !src.vars[k] {
					t.Errorf("ConfigMap key %s is read by no service (a typo?)", k)
				}
			}
			for _, k := range []string{"SHIPFILE_NATS_URL", "SHIPFILE_STREAM_REPLICAS", "SHIPFILE_PUBLIC_URL", "SHIPFILE_S3_ENDPOINT"} {
				if cm.Data[k] == "" {
					t.Errorf("ConfigMap lacks %s", k)
				}
			}
			n, err := strconv.Atoi(cm.Data["SHIPFILE_STREAM_REPLICAS"])
			if err != nil || n < 1 || n > 5 {
				t.Errorf("SHIPFILE_STREAM_REPLICAS = %q, want 1 to 5", cm.Data["SHIPFILE_STREAM_REPLICAS"])
			}
			urls := strings.Split(cm.Data["SHIPFILE_NATS_URL"], ",")
			for _, u := range urls {
				p, err := url.Parse(strings.TrimSpace(u))
				if err != nil || p.Scheme != "nats" || p.Port() == "" {
					t.Errorf("SHIPFILE_NATS_URL entry %q: want nats://host:port (%v)", u, err)
				}
			}
			if dir == productionDir && (n != 3 || len(urls) != 3) {
				t.Errorf("production: %d stream replicas on %d NATS servers, want 3 on the 3 of deploy/nats/values.yaml", n, len(urls))
			}
			for _, k := range []string{"SHIPFILE_WEBHOOK_RETRY_SCHEDULE"} {
				for _, s := range strings.Split(cm.Data[k], ",") {
					if _, err := time.ParseDuration(s); err != nil {
						t.Errorf("%s: %v", k, err)
					}
				}
			}
			for _, k := range []string{"SHIPFILE_WEBHOOK_TIMEOUT", "SHIPFILE_EXPIRY_INTERVAL"} {
				if _, err := time.ParseDuration(cm.Data[k]); cm.Data[k] != "" && err != nil {
					t.Errorf("%s: %v", k, err)
				}
			}
		})
	}
}

// metaSelector turns a LabelSelector into a Selector; nil is an error, not "everything".
func metaSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return nil, errors.New("no selector")
	}
	return metav1.LabelSelectorAsSelector(s)
}
