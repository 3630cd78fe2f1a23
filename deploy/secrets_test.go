package deploy_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// secretKeyUsers are the services that read the webhook secrets, sealed under
// SHIPFILE_SECRET_KEY: the gateway writes them, the dispatcher opens them.
var secretKeyUsers = map[string]bool{"gateway": true, "webhooks": true}

// TestSecretKeyFromSecret: the gateway and the dispatcher take SHIPFILE_SECRET_KEY from
// the Secret `shipfile` (required: they refuse to start without it) and
// SHIPFILE_SECRET_KEY_PREVIOUS from it when present (optional: set only while the key is
// rotated); no other pod gets either.
func TestSecretKeyFromSecret(t *testing.T) {
	t.Parallel()
	src := sources(t)
	for _, v := range []string{"SHIPFILE_SECRET_KEY", "SHIPFILE_SECRET_KEY_PREVIOUS"} {
		if !src.secrets[v] {
			t.Fatalf("%s is not tagged secret in the code: it would be logged", v)
		}
	}
	for _, dir := range []string{baseDir, productionDir} {
		t.Run(dir, func(t *testing.T) {
			d := rendered(t, dir)
			check := func(pod string, c corev1.Container, wants bool) {
				refs := map[string]*corev1.SecretKeySelector{}
				for _, e := range c.Env {
					if strings.HasPrefix(e.Name, "SHIPFILE_SECRET_KEY") {
						if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
							t.Errorf("%s: %s is not from a Secret", pod, e.Name)
							continue
						}
						refs[e.Name] = e.ValueFrom.SecretKeyRef
					}
				}
				if !wants {
					if len(refs) > 0 {
						t.Errorf("%s gets %v: only the gateway and the dispatcher need the key", pod, refs)
					}
					return
				}
				cur, prev := refs["SHIPFILE_SECRET_KEY"], refs["SHIPFILE_SECRET_KEY_PREVIOUS"]
				if cur == nil || cur.Name != "shipfile" || cur.Key != "SHIPFILE_SECRET_KEY" || (cur.Optional != nil && *cur.Optional) {
					t.Errorf("%s: SHIPFILE_SECRET_KEY %+v, want the required key SHIPFILE_SECRET_KEY of Secret shipfile", pod, cur)
				}
				if prev == nil || prev.Name != "shipfile" || prev.Key != "SHIPFILE_SECRET_KEY_PREVIOUS" || prev.Optional == nil || !*prev.Optional {
					t.Errorf("%s: SHIPFILE_SECRET_KEY_PREVIOUS %+v, want the optional key SHIPFILE_SECRET_KEY_PREVIOUS of Secret shipfile", pod, prev)
				}
			}
			for _, dep := range all[appsv1.Deployment](d) {
				for _, c := range dep.Spec.Template.Spec.Containers {
					check("Deployment/"+dep.Name, c, secretKeyUsers[dep.Name])
				}
			}
			for _, job := range all[batchv1.Job](d) {
				for _, c := range job.Spec.Template.Spec.Containers {
					check("Job/"+job.Name, c, false)
				}
			}
		})
	}
}

// TestGatewayOpsPortIsPrivate: the gateway's Service (what the Ingress reaches) exposes
// the API port only, never the ops listener with /metrics and /readyz.
func TestGatewayOpsPortIsPrivate(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{baseDir, productionDir} {
		t.Run(dir, func(t *testing.T) {
			d := rendered(t, dir)
			svc := d.get("Service", "gateway").(*corev1.Service)
			ops := servicePorts["gateway"]
			for _, p := range svc.Spec.Ports {
				if p.TargetPort == intstr.FromString(ops.opsName) || p.TargetPort == intstr.FromInt32(ops.opsPort) || p.Port == ops.opsPort {
					t.Errorf("Service gateway exposes the ops listener: %+v", p)
				}
			}
		})
	}
}

// TestComposeSecretKeyAndOps: in docker-compose.yml the gateway and the dispatcher take
// SHIPFILE_SECRET_KEY from the caller's environment (or .env), required, never written
// in the file; the gateway's ops listener is on the compose network and not published.
func TestComposeSecretKeyAndOps(t *testing.T) {
	t.Parallel()
	compose := readCompose(t)
	for _, name := range []string{"gateway", "mailer", "expiry", "webhooks", "scanner"} {
		svc, ok := compose.Services[name]
		if !ok {
			t.Fatalf("docker-compose.yml has no service %s", name)
		}
		key, has := svc.Environment["SHIPFILE_SECRET_KEY"].(string)
		switch {
		case secretKeyUsers[name] && (!strings.HasPrefix(key, "${SHIPFILE_SECRET_KEY:?") || !strings.HasSuffix(key, "}")):
			t.Errorf("%s: SHIPFILE_SECRET_KEY = %q, want ${SHIPFILE_SECRET_KEY:?…} (required, from the environment)", name, key)
		case !secretKeyUsers[name] && has:
			t.Errorf("%s gets SHIPFILE_SECRET_KEY: only the gateway and the dispatcher need it", name)
		}
	}
	gw := compose.Services["gateway"]
	if gw.Environment["SHIPFILE_OPS_ADDR"] != "0.0.0.0:8084" {
		t.Errorf("gateway: SHIPFILE_OPS_ADDR = %v, want 0.0.0.0:8084 (reachable on the compose network)", gw.Environment["SHIPFILE_OPS_ADDR"])
	}
	for _, p := range gw.Ports {
		if strings.HasSuffix(p, ":8084") {
			t.Errorf("gateway publishes its ops listener: %s", p)
		}
	}
}

// TestComposeScannerReachesClamav: in docker-compose.yml the scanner's
// SHIPFILE_CLAMD_ADDR names the clamav service on clamd's port, the gateway sees it too
// (so SHIPFILE_SCAN defaults to block), and clamav runs ClamAV's own image (freshclam
// inside) with its signature database in a volume.
func TestComposeScannerReachesClamav(t *testing.T) {
	t.Parallel()
	compose := readCompose(t)
	for _, name := range []string{"scanner", "gateway"} {
		if got := compose.Services[name].Environment["SHIPFILE_CLAMD_ADDR"]; got != "clamav:3310" {
			t.Errorf("%s: SHIPFILE_CLAMD_ADDR = %v, want clamav:3310", name, got)
		}
	}
	if scan, ok := compose.Services["gateway"].Environment["SHIPFILE_SCAN"]; ok && scan != "block" {
		t.Errorf("gateway: SHIPFILE_SCAN = %v, want block (or unset: block since clamd is configured)", scan)
	}
	clamav, ok := compose.Services["clamav"]
	if !ok {
		t.Fatal("docker-compose.yml has no service clamav")
	}
	if !strings.HasPrefix(clamav.Image, "clamav/clamav:") {
		t.Errorf("clamav: image %q, want ClamAV's own (clamav/clamav, with freshclam)", clamav.Image)
	}
	if !slices.ContainsFunc(clamav.Volumes, func(v string) bool { return strings.HasSuffix(v, ":/var/lib/clamav") }) {
		t.Errorf("clamav: volumes %v, want one on /var/lib/clamav (the signatures freshclam fetched survive a restart)", clamav.Volumes)
	}
}

// composeFile is what these tests read of docker-compose.yml.
type composeFile struct {
	Services map[string]struct {
		Image       string         `json:"image"`
		Environment map[string]any `json:"environment"`
		Ports       []string       `json:"ports"`
		Volumes     []string       `json:"volumes"`
	} `json:"services"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose composeFile
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	return compose
}
