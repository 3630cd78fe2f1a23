package deploy_test

import (
	"errors"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
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

// The listen variable and port of each service's container, and of its ops listener
// (/readyz, /healthz, /metrics: probes and scrapes). The gateway's ops listener is its
// own (SHIPFILE_OPS_ADDR), never the public port; the other services listen for
// nothing else, so theirs is their only port.
var servicePorts = map[string]struct {
	addrVar string
	port    int32
	opsVar  string
	opsPort int32
	opsName string // the container port's name
}{
	"gateway":  {"SHIPFILE_HTTP_ADDR", 8080, "SHIPFILE_OPS_ADDR", 8084, "ops"},
	"mailer":   {"SHIPFILE_MAILER_ADDR", 8081, "SHIPFILE_MAILER_ADDR", 8081, "http"},
	"expiry":   {"SHIPFILE_EXPIRY_ADDR", 8082, "SHIPFILE_EXPIRY_ADDR", 8082, "http"},
	"webhooks": {"SHIPFILE_WEBHOOKS_ADDR", 8083, "SHIPFILE_WEBHOOKS_ADDR", 8083, "http"},
	"scanner":  {"SHIPFILE_SCANNER_ADDR", 8085, "SHIPFILE_SCANNER_ADDR", 8085, "http"},
}

// containerPorts maps a container's port names to their numbers.
func containerPorts(c corev1.Container) map[string]int32 {
	m := map[string]int32{}
	for _, p := range c.Ports {
		m[p.Name] = p.ContainerPort
	}
	return m
}

// Every Deployment: probes on the service's port, requests and limits, non-root and
// locked down, a PodDisruptionBudget, a grace period longer than the service's shutdown
// timeout, Prometheus annotations; the images pinned in production.
func TestWorkloads(t *testing.T) {
	t.Parallel()
	src := sources(t)
	for _, dir := range []string{baseDir, productionDir} {
		t.Run(dir, func(t *testing.T) {
			d := rendered(t, dir)
			cm := d.get("ConfigMap", "shipfile").(*corev1.ConfigMap)
			deployments := all[appsv1.Deployment](d)
			if len(deployments) != len(servicePorts) {
				t.Errorf("%d Deployments, want %d", len(deployments), len(servicePorts))
			}
			pdbs := all[policyv1.PodDisruptionBudget](d)
			for _, dep := range deployments {
				name := dep.Name
				sp, ok := servicePorts[name]
				if !ok {
					t.Errorf("Deployment %s is no shipfile service", name)
					continue
				}
				tmpl := dep.Spec.Template
				sel, err := metaSelector(dep.Spec.Selector)
				if err != nil || !sel.Matches(labels.Set(tmpl.Labels)) {
					t.Errorf("%s: selector %v does not match its pod labels %v (%v)", name, dep.Spec.Selector, tmpl.Labels, err)
				}
				checkPod(t, "Deployment/"+name, tmpl.Spec)
				// An autoscaled Deployment leaves the count to its autoscaler: a replicas
				// field would reset it at every apply.
				if name == "webhooks" && dep.Spec.Replicas != nil {
					t.Errorf("%s: replicas %d set although an autoscaler owns the count", name, *dep.Spec.Replicas)
				}
				if len(tmpl.Spec.Containers) != 1 {
					t.Fatalf("%s: %d containers, want 1", name, len(tmpl.Spec.Containers))
				}
				c := tmpl.Spec.Containers[0]
				checkImage(t, dir, name, c.Image, "shipfile/"+name)
				env := envOf(c)
				for v, port := range map[string]int32{sp.addrVar: sp.port, sp.opsVar: sp.opsPort} {
					if got := env[v]; got != "0.0.0.0:"+strconv.Itoa(int(port)) {
						t.Errorf("%s: %s = %q, want 0.0.0.0:%d", name, v, got, port)
					}
				}
				wantPorts := map[string]int32{"http": sp.port, sp.opsName: sp.opsPort}
				if got := containerPorts(c); !maps.Equal(got, wantPorts) || len(c.Ports) != len(wantPorts) {
					t.Errorf("%s: ports %v, want %v", name, got, wantPorts)
				}
				if a := tmpl.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != strconv.Itoa(int(sp.opsPort)) || a["prometheus.io/path"] != "/metrics" {
					t.Errorf("%s: Prometheus annotations %v, want a scrape of /metrics on the ops port %d", name, a, sp.opsPort)
				}
				probes := map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe}
				if c.StartupProbe != nil {
					probes["startup"] = c.StartupProbe
				}
				for probeName, p := range probes {
					want := map[string]string{"readiness": "/readyz", "liveness": "/healthz", "startup": "/healthz"}[probeName]
					if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want || p.HTTPGet.Port.String() != sp.opsName {
						t.Errorf("%s: %s probe %+v, want GET %s on port %s", name, probeName, p, want, sp.opsName)
					}
				}
				// The grace period covers the preStop pause and the shutdown timeout.
				shutdown := durationOr(t, env["SHIPFILE_SHUTDOWN_TIMEOUT"], cm.Data["SHIPFILE_SHUTDOWN_TIMEOUT"], src.defaults["SHIPFILE_SHUTDOWN_TIMEOUT"])
				var preStop time.Duration
				if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
					preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
				}
				grace := time.Duration(*tmpl.Spec.TerminationGracePeriodSeconds) * time.Second
				if grace <= shutdown+preStop {
					t.Errorf("%s: terminationGracePeriodSeconds %s, want more than the shutdown timeout %s + preStop %s", name, grace, shutdown, preStop)
				}
				// Variables: each one exists in this service's code.
				for v := range env {
					if !src.byService[name][v] {
						t.Errorf("%s: env %s is not read by services/%s or pkg", name, v, name)
					}
				}
				covered := 0
				for _, pdb := range pdbs {
					s, err := metaSelector(pdb.Spec.Selector)
					if err == nil && s.Matches(labels.Set(tmpl.Labels)) {
						covered++
						if pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil {
							t.Errorf("PodDisruptionBudget %s sets no budget", pdb.Name)
						}
					}
				}
				if covered != 1 {
					t.Errorf("%s: %d PodDisruptionBudgets select its pods, want 1", name, covered)
				}
			}
			job := d.get("Job", "shipfile-migrate").(*batchv1.Job)
			checkPod(t, "Job/shipfile-migrate", job.Spec.Template.Spec)
			c := job.Spec.Template.Spec.Containers[0]
			checkImage(t, dir, "shipfile-migrate", c.Image, "shipfile/gateway")
			if !slices.Equal(c.Command, []string{"/usr/local/bin/shipctl", "migrate"}) {
				t.Errorf("migration Job runs %v, want shipctl migrate", c.Command)
			}
			if _, ok := envOf(c)["SHIPFILE_DATABASE_URL"]; !ok {
				t.Error("migration Job has no SHIPFILE_DATABASE_URL")
			}
			if job.Spec.TTLSecondsAfterFinished == nil {
				t.Error("migration Job stays after it finished: the next release cannot apply a changed one")
			}
		})
	}
}

// checkPod checks what every shipfile pod has in common.
func checkPod(t *testing.T, name string, spec corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod security context %+v, want non-root with a user id and the RuntimeDefault seccomp profile", name, psc)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken || spec.ServiceAccountName != "shipfile" {
		t.Errorf("%s: service account %q, token mounted %v; want shipfile, no token", name, spec.ServiceAccountName, spec.AutomountServiceAccountToken)
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s/%s: container security context %+v, want no privilege escalation, read-only root, all capabilities dropped", name, c.Name, sc)
		}
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, okReq := c.Resources.Requests[res]
			lim, okLim := c.Resources.Limits[res]
			if !okReq || !okLim {
				t.Errorf("%s/%s: %s request or limit missing", name, c.Name, res)
			} else if req.Cmp(lim) > 0 {
				t.Errorf("%s/%s: %s request %s above the limit %s", name, c.Name, res, req.String(), lim.String())
			}
		}
	}
}

// checkImage wants the base's image name, and in production a registry and a pinned tag.
func checkImage(t *testing.T, dir, name, image, base string) {
	t.Helper()
	repo, tag, _ := strings.Cut(image, ":")
	if dir == baseDir {
		if repo != base {
			t.Errorf("%s: image %s, want %s", name, image, base)
		}
		return
	}
	if !strings.HasSuffix(repo, "/"+base) || !strings.Contains(repo, ".") || tag == "" || tag == "latest" {
		t.Errorf("%s: image %q, want <registry>/%s:<release tag>", name, image, base)
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

func durationOr(t *testing.T, values ...string) time.Duration {
	t.Helper()
	for _, v := range values {
		if v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("duration %q: %v", v, err)
			}
			return d
		}
	}
	t.Fatal("no duration")
	return 0
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

// TestTrustedProxiesNarrow: the base trusts no proxy (SHIPFILE_TRUSTED_PROXIES empty,
// as the gateway's default), and the production overlay names a narrow range for its
// ingress controller, never a whole private block (docs/OPERATIONS.md, "Behind TLS"):
// every address inside a trusted range may claim any client IP.
func TestTrustedProxiesNarrow(t *testing.T) {
	t.Parallel()
	if v := rendered(t, baseDir).get("ConfigMap", "shipfile").(*corev1.ConfigMap).Data["SHIPFILE_TRUSTED_PROXIES"]; v != "" {
		t.Errorf("base SHIPFILE_TRUSTED_PROXIES = %q, want empty (no proxy trusted)", v)
	}
	v := rendered(t, productionDir).get("ConfigMap", "shipfile").(*corev1.ConfigMap).Data["SHIPFILE_TRUSTED_PROXIES"]
	if strings.TrimSpace(v) == "" {
		t.Fatal("production overlay: SHIPFILE_TRUSTED_PROXIES is empty; behind the ingress every client would be one address")
	}
	for _, s := range strings.Split(v, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			t.Errorf("SHIPFILE_TRUSTED_PROXIES entry %q: %v", s, err)
			continue
		}
		// A /20 of IPv4 (4,096 addresses) or a /56 of IPv6 at most.
		if least := map[bool]int{true: 20, false: 56}[p.Addr().Is4()]; p.Bits() < least {
			t.Errorf("SHIPFILE_TRUSTED_PROXIES entry %s is wider than /%d: name the ingress controller's own range", p, least)
		}
	}
}

// The gateway's Ingress lets a file of SHIPFILE_MAX_FILE_SIZE through, streamed, with
// time-outs a long transfer needs, to a Service port that exists; the ops paths are
// closed from outside.
func TestIngress(t *testing.T) {
	t.Parallel()
	src := sources(t)
	for _, dir := range []string{baseDir, productionDir} {
		t.Run(dir, func(t *testing.T) {
			d := rendered(t, dir)
			cm := d.get("ConfigMap", "shipfile").(*corev1.ConfigMap)
			maxFile := cm.Data["SHIPFILE_MAX_FILE_SIZE"]
			if maxFile == "" {
				maxFile = src.defaults["SHIPFILE_MAX_FILE_SIZE"]
			}
			maxBytes, err := strconv.ParseInt(maxFile, 10, 64)
			if err != nil {
				t.Fatalf("SHIPFILE_MAX_FILE_SIZE %q: %v", maxFile, err)
			}
			ing := d.get("Ingress", "gateway").(*networkingv1.Ingress)
			a := ing.Annotations
			body, err := nginxSize(a["nginx.ingress.kubernetes.io/proxy-body-size"])
			if err != nil || body < maxBytes+1<<20 {
				t.Errorf("proxy-body-size %q (%d bytes, %v): want at least SHIPFILE_MAX_FILE_SIZE (%d) + 1 MiB", a["nginx.ingress.kubernetes.io/proxy-body-size"], body, err, maxBytes)
			}
			if a["nginx.ingress.kubernetes.io/proxy-request-buffering"] != "off" || a["nginx.ingress.kubernetes.io/proxy-buffering"] != "off" {
				t.Error("the Ingress buffers requests or responses: uploads and downloads must stream")
			}
			for _, k := range []string{"proxy-read-timeout", "proxy-send-timeout"} {
				s, err := strconv.Atoi(a["nginx.ingress.kubernetes.io/"+k])
				if err != nil || s < 600 {
					t.Errorf("%s = %q, want at least 600 seconds", k, a["nginx.ingress.kubernetes.io/"+k])
				}
			}
			if len(ing.Spec.TLS) == 0 || ing.Spec.TLS[0].SecretName == "" {
				t.Error("the Ingress has no TLS")
			}
			if dir == productionDir && a["cert-manager.io/cluster-issuer"] == "" {
				t.Error("production Ingress: no cert-manager issuer")
			}
			svc := d.get("Service", "gateway").(*corev1.Service)
			gw := d.get("Deployment", "gateway").(*appsv1.Deployment)
			sel := labels.SelectorFromSet(svc.Spec.Selector)
			if !sel.Matches(labels.Set(gw.Spec.Template.Labels)) {
				t.Errorf("Service gateway selects %v, not the gateway's pods %v", svc.Spec.Selector, gw.Spec.Template.Labels)
			}
			for _, name := range []string{"gateway", "gateway-ops-paths"} {
				ing := d.get("Ingress", name).(*networkingv1.Ingress)
				for _, r := range ing.Spec.Rules {
					for _, p := range r.HTTP.Paths {
						b := p.Backend.Service
						if b == nil || b.Name != "gateway" || !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == b.Port.Name }) {
							t.Errorf("Ingress %s: path %s goes to %+v, not a port of Service gateway", name, p.Path, b)
						}
						if p.PathType == nil {
							t.Errorf("Ingress %s: path %s has no pathType", name, p.Path)
						}
					}
				}
			}
			ops := d.get("Ingress", "gateway-ops-paths").(*networkingv1.Ingress)
			var closed []string
			for _, p := range ops.Spec.Rules[0].HTTP.Paths {
				closed = append(closed, p.Path)
			}
			sort.Strings(closed)
			if !slices.Equal(closed, []string{"/healthz", "/metrics", "/readyz"}) || ops.Annotations["nginx.ingress.kubernetes.io/whitelist-source-range"] != "127.0.0.1/32" {
				t.Errorf("gateway-ops-paths closes %v with %v, want /healthz, /metrics, /readyz allowed from 127.0.0.1 only", closed, ops.Annotations)
			}
			if ops.Spec.Rules[0].Host != ing.Spec.Rules[0].Host {
				t.Errorf("gateway-ops-paths is for host %q, the gateway for %q", ops.Spec.Rules[0].Host, ing.Spec.Rules[0].Host)
			}
		})
	}
}

// nginxSize parses an nginx size ("10250m", "10g", "512k", "1024").
func nginxSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(strings.ToLower(s), "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(strings.ToLower(s), "m"):
		mult, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(strings.ToLower(s), "g"):
		mult, s = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err
}

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

// PostgreSQL: a CloudNativePG Cluster of three with synchronous replication, whose
// generated Secret the services use, archived by the Barman Cloud plugin into the
// ObjectStore, backed up nightly.
func TestPostgresCluster(t *testing.T) {
	t.Parallel()
	d := rendered(t, productionDir)
	c := d.get("Cluster", "shipfile-db").(*PGCluster)
	if c.Spec.Instances != 3 || c.Spec.PostgreSQL == nil || c.Spec.PostgreSQL.Synchronous == nil || c.Spec.PostgreSQL.Synchronous.Number < 1 {
		t.Errorf("Cluster: %d instances, postgresql %+v; want 3 with synchronous replication", c.Spec.Instances, c.Spec.PostgreSQL)
	}
	if m := c.Spec.PostgreSQL.Synchronous.Method; m != "any" && m != "first" {
		t.Errorf("synchronous method %q, want any or first", m)
	}
	if s := c.Spec.PrimaryUpdateStrategy; s != "unsupervised" && s != "supervised" {
		t.Errorf("primaryUpdateStrategy %q", s)
	}
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.InitDB == nil || c.Spec.Bootstrap.InitDB.Database != "shipfile" {
		t.Errorf("bootstrap %+v, want initdb of database shipfile", c.Spec.Bootstrap)
	}
	// CloudNativePG names the application Secret <cluster>-app; its key uri is a URL.
	appSecret := c.Name + "-app"
	for _, dep := range all[appsv1.Deployment](d) {
		for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "SHIPFILE_DATABASE_URL" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
				e.ValueFrom.SecretKeyRef.Name != appSecret || e.ValueFrom.SecretKeyRef.Key != "uri") {
				t.Errorf("Deployment %s takes SHIPFILE_DATABASE_URL from %+v, want %s/uri", dep.Name, e.ValueFrom, appSecret)
			}
		}
	}
	job := d.get("Job", "shipfile-migrate").(*batchv1.Job)
	if e := job.Spec.Template.Spec.Containers[0].Env[0]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != appSecret {
		t.Errorf("migration Job takes the database URL from %+v, want %s", e.ValueFrom, appSecret)
	}
	var archiver *PGPlugin
	for i, p := range c.Spec.Plugins {
		if p.IsWALArchiver != nil && *p.IsWALArchiver {
			archiver = &c.Spec.Plugins[i]
		}
	}
	if archiver == nil || archiver.Name != "barman-cloud.cloudnative-pg.io" {
		t.Fatalf("no Barman Cloud WAL archiver among the plugins %+v", c.Spec.Plugins)
	}
	storeName := archiver.Parameters["barmanObjectName"]
	store, ok := d.get("ObjectStore", storeName).(*ObjectStore)
	if !ok {
		t.Fatalf("the archiver names ObjectStore %q, which is not rendered", storeName)
	}
	if !strings.HasPrefix(store.Spec.Configuration.DestinationPath, "s3://") || store.Spec.RetentionPolicy == "" {
		t.Errorf("ObjectStore: destination %q, retention %q", store.Spec.Configuration.DestinationPath, store.Spec.RetentionPolicy)
	}
	if creds := store.Spec.Configuration.S3Credentials; creds == nil || creds.AccessKeyID == nil || creds.SecretAccessKey == nil {
		t.Error("ObjectStore: no S3 credentials reference")
	}
	sb := d.get("ScheduledBackup", "shipfile-db-nightly").(*ScheduledBackup)
	if sb.Spec.Cluster.Name != c.Name || sb.Spec.Method != "plugin" || sb.Spec.PluginConfiguration == nil || sb.Spec.PluginConfiguration.Name != archiver.Name {
		t.Errorf("ScheduledBackup %+v, want a plugin backup of %s", sb.Spec, c.Name)
	}
	if f := strings.Fields(sb.Spec.Schedule); len(f) != 6 {
		t.Errorf("schedule %q: CloudNativePG wants six fields, seconds first", sb.Spec.Schedule)
	}
}

// Every service that creates or updates the streams does so with SHIPFILE_STREAM_REPLICAS:
// one that did not would set them back to one replica at each of its starts.
func TestServicesEnsureStreamsWithReplicas(t *testing.T) {
	t.Parallel()
	src := sources(t)
	// Every service main connects through service.Open with its cfg.NATS, which calls
	// events.Connect, which creates the streams with SHIPFILE_STREAM_REPLICAS; a bare
	// bus.Connect or EnsureStreams could set them back.
	open, err := os.ReadFile("../pkg/service/connect.go")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`events\.Connect\(ctx, \*want\.NATS,`).Match(open) {
		t.Error("pkg/service.Open does not connect through events.Connect(ctx, *want.NATS, …)")
	}
	connected := map[string]bool{}
	for _, call := range src.natsStarts {
		file, expr, _ := strings.Cut(call, ": ")
		if strings.HasPrefix(expr, "service.Open(") && !strings.Contains(expr, "NATS:") {
			continue // a binary that opens no NATS connection (shipctl)
		}
		if !strings.HasPrefix(expr, "service.Open(") || !strings.Contains(expr, "NATS: &cfg.NATS") {
			t.Errorf("%s: %s; want service.Open(ctx, name, service.Connections{…, NATS: &cfg.NATS, …})", file, expr)
			continue
		}
		connected[filepath.Base(filepath.Dir(file))] = true
	}
	for _, svc := range []string{"gateway", "mailer", "expiry", "webhooks", "scanner"} {
		if !connected[svc] {
			t.Errorf("services/%s's main does not call service.Open with NATS: &cfg.NATS", svc)
		}
	}
}

// deploy/nats/values.yaml: three servers, JetStream on file storage, sync_interval
// always, monitoring on 8222 (KEDA's endpoint), the Prometheus exporter on.
func TestNATSHelmValues(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("nats/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config struct {
			Cluster struct {
				Enabled  bool `json:"enabled"`
				Replicas int  `json:"replicas"`
			} `json:"cluster"`
			JetStream struct {
				Enabled   bool `json:"enabled"`
				FileStore struct {
					Enabled bool   `json:"enabled"`
					Dir     string `json:"dir"`
					PVC     struct {
						Enabled bool   `json:"enabled"`
						Size    string `json:"size"`
					} `json:"pvc"`
				} `json:"fileStore"`
				Merge map[string]any `json:"merge"`
			} `json:"jetstream"`
			Monitor struct {
				Enabled bool `json:"enabled"`
				Port    int  `json:"port"`
			} `json:"monitor"`
		} `json:"config"`
		PromExporter struct {
			Enabled bool `json:"enabled"`
		} `json:"promExporter"`
	}
	if err := yaml.Unmarshal(j, &v); err != nil {
		t.Fatal(err)
	}
	c := v.Config
	if !c.Cluster.Enabled || c.Cluster.Replicas != 3 {
		t.Errorf("cluster %+v, want 3 replicas", c.Cluster)
	}
	if !c.JetStream.Enabled || !c.JetStream.FileStore.Enabled || !c.JetStream.FileStore.PVC.Enabled || c.JetStream.FileStore.PVC.Size == "" {
		t.Errorf("jetstream %+v, want file storage on a volume", c.JetStream)
	}
	if c.JetStream.Merge["sync_interval"] != "always" {
		t.Errorf("jetstream sync_interval = %v, want always", c.JetStream.Merge["sync_interval"])
	}
	if !c.Monitor.Enabled || c.Monitor.Port != 8222 || !v.PromExporter.Enabled {
		t.Errorf("monitor %+v, exporter %v; want 8222 and the exporter", c.Monitor, v.PromExporter.Enabled)
	}
}

// metaSelector turns a LabelSelector into a Selector; nil is an error, not "everything".
func metaSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return nil, errors.New("no selector")
	}
	return metav1.LabelSelectorAsSelector(s)
}

// TestScannerReachesClamav: in the base and every overlay the scanner's
// SHIPFILE_CLAMD_ADDR (its own env or the ConfigMap; the code's default, 127.0.0.1:3310,
// is nothing in a pod) names the clamav Service and one of its ports, and that Service
// selects the clamav StatefulSet, which runs ClamAV's own image (freshclam inside).
func TestScannerReachesClamav(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{baseDir, productionDir} {
		t.Run(dir, func(t *testing.T) {
			d := rendered(t, dir)
			cm := d.get("ConfigMap", "shipfile").(*corev1.ConfigMap)
			dep := d.get("Deployment", "scanner").(*appsv1.Deployment)
			addr, ok := envOf(dep.Spec.Template.Spec.Containers[0])["SHIPFILE_CLAMD_ADDR"]
			if !ok {
				addr = cm.Data["SHIPFILE_CLAMD_ADDR"]
			}
			host, port, err := net.SplitHostPort(strings.TrimPrefix(addr, "tcp://"))
			if err != nil {
				t.Fatalf("scanner: SHIPFILE_CLAMD_ADDR %q, want the clamav Service's host:port (%v)", addr, err)
			}
			svc, _ := d.get("Service", "clamav").(*corev1.Service)
			if svc == nil {
				t.Fatal("no Service/clamav")
			}
			if first, _, _ := strings.Cut(host, "."); first != svc.Name ||
				(host != svc.Name && !strings.HasPrefix(host, svc.Name+"."+svc.Namespace+".")) {
				t.Errorf("scanner: SHIPFILE_CLAMD_ADDR host %q is not the Service %s/%s", host, svc.Namespace, svc.Name)
			}
			if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return strconv.Itoa(int(p.Port)) == port }) {
				t.Errorf("scanner: SHIPFILE_CLAMD_ADDR port %s is not a port of Service/clamav (%v)", port, svc.Spec.Ports)
			}
			sts := d.get("StatefulSet", "clamav").(*appsv1.StatefulSet)
			if sel := labels.SelectorFromSet(svc.Spec.Selector); len(svc.Spec.Selector) == 0 || !sel.Matches(labels.Set(sts.Spec.Template.Labels)) {
				t.Errorf("Service/clamav selector %v does not select the clamav pods %v", svc.Spec.Selector, sts.Spec.Template.Labels)
			}
			if img := sts.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, "clamav/clamav:") {
				t.Errorf("clamav runs %q, want ClamAV's own image (clamav/clamav, with freshclam)", img)
			}
			if cm.Data["SHIPFILE_SCAN"] != "block" {
				t.Errorf("ConfigMap: SHIPFILE_SCAN = %q, want block", cm.Data["SHIPFILE_SCAN"])
			}
		})
	}
}
