package deploy_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// The webhook dispatcher scales on its own: on CPU in the base, in production by KEDA on
// the pending jobs of its per-subscription delivery consumers, with CPU as a second trigger.
func TestWebhooksAutoscaling(t *testing.T) {
	t.Parallel()
	src := sources(t)
	// The per-subscription delivery consumers are on the events stream (one hop).
	stream := src.consts["events.StreamEvents"]
	if stream == "" {
		t.Fatal("found no events.StreamEvents constant in ../pkg/events")
	}

	base := rendered(t, baseDir)
	hpa := base.get("HorizontalPodAutoscaler", "webhooks").(*autoscalingv2.HorizontalPodAutoscaler)
	if r := hpa.Spec.ScaleTargetRef; r.Kind != "Deployment" || r.Name != "webhooks" || base.get("Deployment", r.Name) == nil {
		t.Errorf("HPA targets %+v, want Deployment webhooks", r)
	}
	if len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].Resource == nil || hpa.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU {
		t.Errorf("HPA metrics %+v, want CPU", hpa.Spec.Metrics)
	}

	prod := rendered(t, productionDir)
	so := prod.get("ScaledObject", "webhooks").(*ScaledObject)
	if r := so.Spec.ScaleTargetRef; r == nil || r.Name != "webhooks" || (r.Kind != "" && r.Kind != "Deployment") || prod.get("Deployment", r.Name) == nil {
		t.Errorf("ScaledObject targets %+v, want Deployment webhooks", so.Spec.ScaleTargetRef)
	}
	if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount < 2 || so.Spec.MaxReplicaCount == nil || *so.Spec.MaxReplicaCount <= *so.Spec.MinReplicaCount {
		t.Errorf("replicas %v to %v, want at least 2 and a higher maximum", so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount)
	}
	if so.Spec.Fallback == nil || so.Spec.Fallback.Replicas < *so.Spec.MinReplicaCount {
		t.Errorf("fallback %+v, want replicas to hold when the scaler fails", so.Spec.Fallback)
	}
	cm := prod.get("ConfigMap", "shipfile").(*corev1.ConfigMap)
	consumer := cm.Data["SHIPFILE_WEBHOOK_DELIVER_CONSUMER"]
	if consumer == "" {
		consumer = src.defaults["SHIPFILE_WEBHOOK_DELIVER_CONSUMER"]
	}
	types := map[string]ScaleTrigger{}
	for _, tr := range so.Spec.Triggers {
		types[tr.Type] = tr
	}
	// Each subscription has its own delivery consumer (<consumer>-<hook id>), so the
	// backlog is the sum of their pending messages, read from Prometheus.
	prom, ok := types["prometheus"]
	if !ok {
		t.Fatalf("no prometheus trigger in %+v", so.Spec.Triggers)
	}
	known := map[string]bool{"serverAddress": true, "query": true, "threshold": true, "activationThreshold": true,
		"ignoreNullValues": true, "namespace": true, "unsafeSsl": true}
	for k := range prom.Metadata {
		if !known[k] {
			t.Errorf("prometheus trigger: unknown metadata %q", k)
		}
	}
	q := prom.Metadata["query"]
	for _, want := range []string{"sum(", "nats_consumer_num_pending", `stream_name="` + stream + `"`,
		`consumer_name=~"` + consumer + `-[0-9]+"`, `is_consumer_leader="true"`} {
		if !strings.Contains(q, want) {
			t.Errorf("prometheus trigger query %q lacks %s", q, want)
		}
	}
	if n, err := strconv.Atoi(prom.Metadata["threshold"]); err != nil || n < 1 {
		t.Errorf("threshold %q", prom.Metadata["threshold"])
	}
	if !regexp.MustCompile(`^https?://[a-z0-9.-]+(:[0-9]+)?$`).MatchString(prom.Metadata["serverAddress"]) {
		t.Errorf("serverAddress %q, want a Prometheus URL", prom.Metadata["serverAddress"])
	}
	if cpu, ok := types["cpu"]; !ok || cpu.MetricType != autoscalingv2.UtilizationMetricType || cpu.Metadata["value"] == "" {
		t.Errorf("cpu trigger %+v, want Utilization with a value", cpu)
	}
	// The fan-out consumer's name, the other one, is configured too.
	if cm.Data["SHIPFILE_WEBHOOK_FANOUT_CONSUMER"] == consumer {
		t.Error("the fan-out and delivery consumers have one name")
	}
}
