package deploy_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// The Helm chart, the production-like values file beside it, and the release the tests
// render it as.
const (
	chartDir         = "helm/shipfile"
	chartProduction  = "helm/shipfile/ci/production-values.yaml"
	releaseName      = "shipfile"
	releaseNamespace = "shipfile"
)

// minKube is the oldest Kubernetes the chart admits (Chart.yaml's kubeVersion; the gateway's
// preStop sleep needs 1.30): the tests lint and render for it, so an API it lacks fails.
var minKube = chartutil.KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30"}

// chartValues reads the values files in order and merges overrides on top, as
// `helm install -f a.yaml -f b.yaml --set …` does.
func chartValues(t *testing.T, files []string, overrides ...map[string]any) map[string]any {
	t.Helper()
	vals := map[string]any{}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mergeValues(vals, v)
	}
	for _, o := range overrides {
		mergeValues(vals, o)
	}
	return vals
}

// mergeValues merges src into dst: maps key by key, anything else replaced.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
			cp := map[string]any{}
			mergeValues(cp, sm)
			dst[k] = cp
			continue
		}
		dst[k] = v
	}
}

// renderChart renders the chart as `helm template` (and `helm install --dry-run`) do: the
// chart's defaults coalesced with vals, checked against values.schema.json, every template
// rendered in strict mode (a missing value is an error), split into objects.
func renderChart(vals map[string]any) ([]object, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	// As `helm install` does, refuse a cluster older than the chart's kubeVersion.
	if !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, minKube.Version) {
		return nil, fmt.Errorf("the chart's kubeVersion %q refuses Kubernetes %s", ch.Metadata.KubeVersion, minKube.Version)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = minKube
	rv, err := chartutil.ToRenderValues(ch, vals,
		chartutil.ReleaseOptions{Name: releaseName, Namespace: releaseNamespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Engine{Strict: true}.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	var out []object
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTES.txt, _helpers.tpl
		}
		for _, doc := range releaseutil.SplitManifests(files[name]) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			j, err := yaml.YAMLToJSONStrict([]byte(doc))
			if err != nil {
				return nil, fmt.Errorf("%s: %w\n%s", name, err, doc)
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(j, &head); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if head.Kind == "" {
				continue // a document that is only comments
			}
			out = append(out, object{APIVersion: head.APIVersion, Kind: head.Kind, Name: head.Metadata.Name, JSON: j})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the chart rendered nothing")
	}
	return out, nil
}

// mustRenderChart renders the chart and decodes every object strictly into its type.
func mustRenderChart(t *testing.T, vals map[string]any) decoded {
	t.Helper()
	objs, err := renderChart(vals)
	if err != nil {
		t.Fatal(err)
	}
	return decodeAll(t, objs)
}

// lintChart runs `helm lint --strict` (helm's pkg/lint: Chart.yaml, values and their schema,
// every template rendered and parsed, APIs deprecated in minKube) with vals, in the
// release's namespace, and returns its warnings and errors.
func lintChart(vals map[string]any) []support.Message {
	var bad []support.Message
	for _, m := range lint.AllWithKubeVersion(chartDir, vals, releaseNamespace, &minKube).Messages {
		if m.Severity >= support.WarningSev {
			bad = append(bad, m)
		}
	}
	return bad
}

// The chart's own value sets: its defaults, the production-like file, and both with the
// options the defaults leave off.
func chartCases(t *testing.T) []struct {
	name string
	dir  string // the kustomization whose image rules apply (checkImage)
	vals map[string]any
} {
	return []struct {
		name string
		dir  string
		vals map[string]any
	}{
		{"defaults", baseDir, chartValues(t, nil)},
		{"production", productionDir, chartValues(t, []string{chartProduction})},
		{"otel and no ingress", baseDir, chartValues(t, nil, map[string]any{
			"otel": map[string]any{"endpoint": "http://otel-collector.observability.svc:4318"}, "ingress": map[string]any{"enabled": false}})},
	}
}

// `helm lint` passes with no warning for each value set, and the chart admits the
// Kubernetes it is tested for and no older one.
func TestHelmChartLints(t *testing.T) {
	t.Parallel()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if c := ch.Metadata.KubeVersion; !chartutil.IsCompatibleRange(c, minKube.Version) || chartutil.IsCompatibleRange(c, "v1.29.9") {
		t.Errorf("Chart.yaml kubeVersion %q, want %s and later", c, minKube.Version)
	}
	for _, tc := range chartCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range lintChart(tc.vals) {
				t.Errorf("helm lint: %s", m)
			}
		})
	}
}

// values.schema.json refuses values that would render a broken or unsafe release, and lint
// reports them; each case differs from the defaults by one mistake.
func TestHelmValuesSchemaRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		vals map[string]any
	}{
		{"misspelled service field", map[string]any{"gateway": map[string]any{"replica": 3}}},
		{"unknown top-level key", map[string]any{"webhook": map[string]any{}}},
		{"a credential in the ConfigMap", map[string]any{"config": map[string]any{"SHIPFILE_DATABASE_URL": "postgres://u:p@db/shipfile"}}},
		{"a setting that is not SHIPFILE_*", map[string]any{"config": map[string]any{"LOG_LEVEL": "debug"}}},
		{"OTel endpoint without a scheme", map[string]any{"otel": map[string]any{"endpoint": "collector:4318"}}},
		{"replicas as a string", map[string]any{"mailer": map[string]any{"replicas": "two"}}},
		{"a resource without a limit", map[string]any{"expiry": map[string]any{"resources": map[string]any{"limits": nil}}}},
		{"a bad quantity", map[string]any{"scanner": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "1Gb"}}}}},
		{"no database Secret", map[string]any{"database": map[string]any{"secretName": ""}}},
		{"an SMTP TLS mode the mailer refuses", map[string]any{"smtp": map[string]any{"tls": "ssl"}}},
		{"a NATS URL that is not one", map[string]any{"nats": map[string]any{"url": "http://nats:4222"}}},
		{"a NATS password in the ConfigMap", map[string]any{"nats": map[string]any{"url": "nats://shipfile:secret@nats:4222"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := chartValues(t, nil, tt.vals)
			if _, err := renderChart(vals); err == nil {
				t.Errorf("rendered with %v", tt.vals)
			}
			if len(lintChart(vals)) == 0 {
				t.Errorf("helm lint passed with %v", tt.vals)
			}
		})
	}
	// And the defaults render.
	if _, err := renderChart(chartValues(t, nil)); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

// Every rendered object decodes strictly into its Kubernetes type (local types for KEDA's
// ScaledObject), sits in the release's namespace with shipfile's labels, and holds what the
// kustomize tests ask of the same objects: locked-down pods, requests and limits, one
// PodDisruptionBudget a service, autoscalers that target their Deployment, credentials only
// by reference.
func TestHelmChartRendersValidObjects(t *testing.T) {
	t.Parallel()
	for _, tc := range chartCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			d := mustRenderChart(t, tc.vals)
			want := []string{"ServiceAccount/shipfile", "ConfigMap/shipfile", "Job/shipfile-migrate",
				"StatefulSet/clamav", "Service/clamav", "Service/gateway", "HorizontalPodAutoscaler/gateway"}
			for name := range servicePorts {
				want = append(want, "Deployment/"+name, "PodDisruptionBudget/"+name)
			}
			keda := tc.name == "production"
			if keda {
				want = append(want, "ScaledObject/webhooks")
			} else {
				want = append(want, "HorizontalPodAutoscaler/webhooks")
			}
			if tc.name != "otel and no ingress" {
				want = append(want, "Ingress/gateway", "Ingress/gateway-ops-paths")
			}
			got := slices.Sorted(maps.Keys(d.typed))
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("rendered %v\nwant %v", got, want)
			}
			for _, o := range d.objects {
				var meta struct {
					Metadata struct {
						Namespace string            `json:"namespace"`
						Labels    map[string]string `json:"labels"`
					} `json:"metadata"`
				}
				if err := json.Unmarshal(o.JSON, &meta); err != nil {
					t.Fatal(err)
				}
				if meta.Metadata.Namespace != releaseNamespace {
					t.Errorf("%s is in namespace %q, want %s", o, meta.Metadata.Namespace, releaseNamespace)
				}
				if l := meta.Metadata.Labels; l["app.kubernetes.io/part-of"] != "shipfile" || l["app.kubernetes.io/managed-by"] != "Helm" || l["app.kubernetes.io/instance"] != releaseName {
					t.Errorf("%s: labels %v, want part-of shipfile, managed-by Helm, instance %s", o, l, releaseName)
				}
				if o.Kind == "Secret" {
					t.Errorf("%s: the chart renders a Secret; credentials come from existing ones", o)
				}
			}

			cm := d.get("ConfigMap", "shipfile").(*corev1.ConfigMap)
			for k, v := range cm.Data {
				if !sourcesSecret(t, k) {
					continue
				}
				// The NATS URL is masked in logs because it may carry a password; in the
				// ConfigMap it must not.
				if k == "SHIPFILE_NATS_URL" {
					for _, u := range strings.Split(v, ",") {
						if p, err := url.Parse(strings.TrimSpace(u)); err != nil || p.User != nil {
							t.Errorf("ConfigMap: SHIPFILE_NATS_URL entry %q carries user info (or does not parse: %v)", u, err)
						}
					}
					continue
				}
				t.Errorf("ConfigMap: %s is a secret", k)
			}
			pdbs := all[policyv1.PodDisruptionBudget](d)
			for _, dep := range all[appsv1.Deployment](d) {
				tmpl := dep.Spec.Template
				checkPod(t, "Deployment/"+dep.Name, tmpl.Spec)
				c := tmpl.Spec.Containers[0]
				checkImage(t, tc.dir, dep.Name, c.Image, "shipfile/"+dep.Name)
				sel, err := metaSelector(dep.Spec.Selector)
				if err != nil || !sel.Matches(labels.Set(tmpl.Labels)) {
					t.Errorf("%s: selector %v does not match its pod labels %v (%v)", dep.Name, dep.Spec.Selector, tmpl.Labels, err)
				}
				autoscaled := dep.Name == "webhooks" || dep.Name == "gateway"
				if autoscaled && dep.Spec.Replicas != nil {
					t.Errorf("%s: replicas %d set although an autoscaler owns the count", dep.Name, *dep.Spec.Replicas)
				}
				if !autoscaled && dep.Spec.Replicas == nil {
					t.Errorf("%s: no replicas", dep.Name)
				}
				if c.ReadinessProbe == nil || c.LivenessProbe == nil {
					t.Errorf("%s: readiness %v, liveness %v; want both", dep.Name, c.ReadinessProbe, c.LivenessProbe)
				}
				for _, e := range c.Env {
					if sourcesSecret(t, e.Name) && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
						t.Errorf("%s: %s is not taken from a Secret", dep.Name, e.Name)
					}
				}
				covered := 0
				for _, pdb := range pdbs {
					if s, err := metaSelector(pdb.Spec.Selector); err == nil && s.Matches(labels.Set(tmpl.Labels)) {
						covered++
					}
				}
				if covered != 1 {
					t.Errorf("%s: %d PodDisruptionBudgets select its pods, want 1", dep.Name, covered)
				}
			}
			job := d.get("Job", "shipfile-migrate").(*batchv1.Job)
			checkPod(t, "Job/shipfile-migrate", job.Spec.Template.Spec)
			checkImage(t, tc.dir, "shipfile-migrate", job.Spec.Template.Spec.Containers[0].Image, "shipfile/gateway")
			if h := job.Annotations["helm.sh/hook"]; !strings.Contains(h, "pre-upgrade") {
				t.Errorf("migration Job: hook %q, want it to run before every upgrade", h)
			}
			for _, hpa := range all[autoscalingv2.HorizontalPodAutoscaler](d) {
				if r := hpa.Spec.ScaleTargetRef; r.Kind != "Deployment" || d.get("Deployment", r.Name) == nil {
					t.Errorf("HPA %s targets %+v, no rendered Deployment", hpa.Name, r)
				}
				if len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].Resource == nil || hpa.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU {
					t.Errorf("HPA %s: metrics %+v, want CPU", hpa.Name, hpa.Spec.Metrics)
				}
			}
			// clamd fails closed (clamd_test.go): it names what it did not scan.
			clamd := envOf(d.get("StatefulSet", "clamav").(*appsv1.StatefulSet).Spec.Template.Spec.Containers[0])
			for _, o := range clamdAlerts {
				if v := clamd["CLAMD_CONF_"+o]; v != "yes" {
					t.Errorf("clamav: CLAMD_CONF_%s = %q, want yes", o, v)
				}
			}
			if keda {
				so := d.get("ScaledObject", "webhooks").(*ScaledObject)
				if r := so.Spec.ScaleTargetRef; r == nil || d.get("Deployment", r.Name) == nil {
					t.Errorf("ScaledObject targets %+v, no rendered Deployment", so.Spec.ScaleTargetRef)
				}
			}
		})
	}
}

// sourcesSecret tells whether the services' code marks a variable secret:"true".
func sourcesSecret(t *testing.T, name string) bool {
	t.Helper()
	return sources(t).secrets[name]
}

// OTEL_EXPORTER_OTLP_ENDPOINT is unset by default; with otel.endpoint every shipfile
// service gets it and its own OTEL_SERVICE_NAME, and ClamAV nothing.
func TestHelmOTelEndpoint(t *testing.T) {
	t.Parallel()
	const endpoint = "http://otel-collector.observability.svc:4318"
	for _, tt := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"unset", chartValues(t, nil), ""},
		{"set", chartValues(t, nil, map[string]any{"otel": map[string]any{"endpoint": endpoint}}), endpoint},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := mustRenderChart(t, tt.vals)
			deps := all[appsv1.Deployment](d)
			if len(deps) != len(servicePorts) {
				t.Fatalf("%d Deployments, want %d", len(deps), len(servicePorts))
			}
			for _, dep := range deps {
				env := envOf(dep.Spec.Template.Spec.Containers[0])
				if got, ok := env["OTEL_EXPORTER_OTLP_ENDPOINT"]; got != tt.want || ok != (tt.want != "") {
					t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT = %q (set %v), want %q", dep.Name, got, ok, tt.want)
				}
				if name, ok := env["OTEL_SERVICE_NAME"]; ok != (tt.want != "") || (ok && name != dep.Name) {
					t.Errorf("%s: OTEL_SERVICE_NAME = %q (set %v)", dep.Name, name, ok)
				}
			}
			sts := d.get("StatefulSet", "clamav").(*appsv1.StatefulSet)
			if _, ok := envOf(sts.Spec.Template.Spec.Containers[0])["OTEL_EXPORTER_OTLP_ENDPOINT"]; ok {
				t.Error("clamav: OTEL_EXPORTER_OTLP_ENDPOINT set")
			}
		})
	}
}

// The chart and the kustomizations describe one deployment: rendered with the values
// equivalent to a kustomization, the chart renders the same objects with the same specs —
// images, commands, env, ports, probes, resources, security contexts, the ConfigMap's
// settings, the Ingress rules, the autoscalers and KEDA's triggers. Only Helm's own
// bookkeeping differs (its labels, the hook annotations, the config checksum), and what a
// kustomization holds that the chart leaves to others (the Namespace, the production
// overlay's PostgreSQL). A change to one side and not the other fails here.
func TestHelmChartMatchesKustomize(t *testing.T) {
	t.Parallel()
	// The gateway's HorizontalPodAutoscaler is the chart's addition; the kustomizations
	// set its replicas instead.
	noGatewayHPA := map[string]any{"gateway": map[string]any{"autoscaling": map[string]any{"enabled": false}}}
	tests := []struct {
		dir  string
		vals map[string]any
	}{
		{baseDir, chartValues(t, nil, noGatewayHPA)},
		{productionDir, chartValues(t, []string{chartProduction}, noGatewayHPA)},
	}
	notInChart := map[string]bool{"Namespace": true, "Cluster": true, "ObjectStore": true, "ScheduledBackup": true}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			kust := map[string]map[string]any{}
			for _, o := range rendered(t, tt.dir).objects {
				if !notInChart[o.Kind] {
					kust[o.String()] = comparableObject(t, o)
				}
			}
			objs, err := renderChart(tt.vals)
			if err != nil {
				t.Fatal(err)
			}
			chart := map[string]map[string]any{}
			for _, o := range objs {
				chart[o.String()] = comparableObject(t, o)
			}
			kNames, cNames := slices.Sorted(maps.Keys(kust)), slices.Sorted(maps.Keys(chart))
			if !slices.Equal(kNames, cNames) {
				t.Errorf("objects differ:\nkustomize %v\nchart     %v", kNames, cNames)
			}
			for _, name := range kNames {
				c, ok := chart[name]
				if !ok {
					continue
				}
				for _, diff := range diffValues(name, kust[name], c) {
					t.Error(diff)
				}
			}
		})
	}
}

// Helm's own labels and annotations, which the kustomizations do not have.
var (
	helmLabels      = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"}
	helmAnnotations = []string{"checksum/config", "helm.sh/hook", "helm.sh/hook-delete-policy"}
)

// comparableObject is an object as generic JSON without Helm's bookkeeping, its env lists
// sorted by name (their order means nothing here: no value refers to another).
func comparableObject(t *testing.T, o object) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(o.JSON, &m); err != nil {
		t.Fatalf("%s: %v", o, err)
	}
	normalize(m)
	return m
}

func normalize(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			switch k {
			case "labels", "annotations":
				if lm, ok := x.(map[string]any); ok {
					drop := helmLabels
					if k == "annotations" {
						drop = helmAnnotations
					}
					for _, d := range drop {
						delete(lm, d)
					}
					if len(lm) == 0 {
						delete(v, k)
					}
				}
			case "env":
				if list, ok := x.([]any); ok {
					sort.SliceStable(list, func(i, j int) bool { return envName(list[i]) < envName(list[j]) })
				}
			}
			normalize(x)
		}
	case []any:
		for _, x := range v {
			normalize(x)
		}
	}
}

func envName(v any) string {
	m, _ := v.(map[string]any)
	s, _ := m["name"].(string)
	return s
}

// diffValues lists where a (kustomize) and b (the chart) differ, one line a path.
func diffValues(path string, a, b any) []string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		var out []string
		keys := slices.Sorted(maps.Keys(av))
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			x, inA := av[k]
			y, inB := bv[k]
			switch {
			case !inA:
				out = append(out, fmt.Sprintf("%s.%s: only the chart has %s", path, k, short(y)))
			case !inB:
				out = append(out, fmt.Sprintf("%s.%s: only kustomize has %s", path, k, short(x)))
			default:
				out = append(out, diffValues(path+"."+k, x, y)...)
			}
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			break
		}
		var out []string
		for i := range av {
			out = append(out, diffValues(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i])...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	return []string{fmt.Sprintf("%s: kustomize %s, chart %s", path, short(a), short(b))}
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}
