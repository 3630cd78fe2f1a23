package deploy_test

import (
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
)

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
