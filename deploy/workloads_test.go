package deploy_test

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
)

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
