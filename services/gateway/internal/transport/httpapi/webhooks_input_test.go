package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// privateURLs are webhook targets on the gateway's own machine or network.
var privateURLs = map[string]string{
	"loopback":           "http://127.0.0.1:9000/hook",
	"private":            "http://10.1.2.3/hook",
	"localhost":          "http://localhost:8080/hook",
	"localhost any case": "https://LocalHost./hook",
	"under .localhost":   "http://api.localhost/hook",
	"ipv6 loopback":      "http://[::1]/hook",
	"ipv4-mapped ipv6":   "http://[::ffff:127.0.0.1]/hook",
	"link-local":         "http://169.254.169.254/latest/meta-data",
	"ipv6 link-local":    "http://[fe80::1]/hook",
	"ipv6 unique local":  "http://[fd00::1]/hook",
	"unspecified":        "http://0.0.0.0/hook",
	"private 172.16/12":  "https://172.20.0.5/hook",
	"private 192.168/16": "https://192.168.1.1/hook",
	// The guard of pkg/netguard, which the dispatcher also dials through.
	"carrier-grade NAT":        "http://100.64.0.1/",
	"ipv4-mapped CGNAT":        "http://[::ffff:100.64.0.1]/hook",
	"IETF protocol assignment": "http://192.0.0.8/hook",
	"benchmarking":             "http://198.18.0.1/hook",
	"reserved 240/4":           "http://240.0.0.1/hook",
	"broadcast":                "http://255.255.255.255/hook",
	"ipv6 site-local":          "http://[fec0::1]/hook",
	"multicast":                "http://224.0.0.1/hook",
	"ipv6 multicast":           "http://[ff02::1]/hook",
	"NAT64 of loopback":        "http://[64:ff9b::7f00:1]/hook",
}

func TestWebhookRejectsBadInput(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	good := func(extra map[string]any) map[string]any {
		m := map[string]any{"url": "https://hooks.example.com/x"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	cases := map[string]any{
		"max_in_flight 0":        good(map[string]any{"max_in_flight": 0}),
		"max_in_flight 257":      good(map[string]any{"max_in_flight": 257}),
		"max_in_flight a string": good(map[string]any{"max_in_flight": "4"}),
		"rate_limit 0":           good(map[string]any{"rate_limit": 0}),
		"rate_limit 10001":       good(map[string]any{"rate_limit": 10001}),
		"rate_limit negative":    good(map[string]any{"rate_limit": -5}),
		"rate_limit fractional":  good(map[string]any{"rate_limit": 1.5}),
		"ordering unknown":       good(map[string]any{"ordering": "event"}),
		"ordering a number":      good(map[string]any{"ordering": 1}),
		"malformed JSON":         `{"url": `,
		"not an object":          `["https://hooks.example.com/x"]`,
		"two objects":            `{"url": "https://hooks.example.com/x"} {}`,
		"empty body":             "",
		"url missing":            map[string]any{"events": []string{events.TypePackageCreated}},
		"url null":               map[string]any{"url": nil},
		"url empty":              good(map[string]any{"url": ""}),
		"url ftp":                good(map[string]any{"url": "ftp://hooks.example.com/x"}),
		"url relative":           good(map[string]any{"url": "/hooks/x"}),
		"url scheme-relative":    good(map[string]any{"url": "//hooks.example.com/x"}),
		"url without host":       good(map[string]any{"url": "http://"}),
		"url empty host":         good(map[string]any{"url": "https:///x"}),
		"url opaque":             good(map[string]any{"url": "http:hooks.example.com"}),
		"url javascript":         good(map[string]any{"url": "javascript:alert(1)"}),
		"url mailto":             good(map[string]any{"url": "mailto:a@example.com"}),
		"url too long":           good(map[string]any{"url": "https://hooks.example.com/" + strings.Repeat("a", 2049-len("https://hooks.example.com/"))}),
		"url with userinfo":      good(map[string]any{"url": "https://user:pw@hooks.example.com/x"}),
		"url with user":          good(map[string]any{"url": "https://user@hooks.example.com/x"}),
		"url with space":         good(map[string]any{"url": "https://hooks.example.com/a b"}),
		"url leading space":      good(map[string]any{"url": " https://hooks.example.com/x"}),
		"url with newline":       good(map[string]any{"url": "https://hooks.example.com/x\n"}),
		"url bad port":           good(map[string]any{"url": "https://hooks.example.com:99999/x"}),
		"url port zero":          good(map[string]any{"url": "https://hooks.example.com:0/x"}),
		"url port not a number":  good(map[string]any{"url": "https://hooks.example.com:http/x"}),
		"url short ipv4":         good(map[string]any{"url": "http://127.1/x"}),
		"url decimal ipv4":       good(map[string]any{"url": "http://2130706433/x"}),
		"url hex ipv4":           good(map[string]any{"url": "http://0x7f000001/x"}),
		"url wrong type":         good(map[string]any{"url": 1}),
		"url array":              good(map[string]any{"url": []string{"https://hooks.example.com/x"}}),
		"events empty":           good(map[string]any{"events": []string{}}),
		"events unknown":         good(map[string]any{"events": []string{events.TypePackageCreated, "package.exploded"}}),
		"events webhook.test":    good(map[string]any{"events": []string{events.TypeWebhookTest}}),
		"events wrong case":      good(map[string]any{"events": []string{"Package.Created"}}),
		"events a string":        good(map[string]any{"events": events.TypePackageCreated}),
		"events of numbers":      good(map[string]any{"events": []int{1}}),
		"events an object":       good(map[string]any{"events": map[string]any{"package.created": true}}),
		"description too long":   good(map[string]any{"description": strings.Repeat("d", 501)}),
		"description control":    good(map[string]any{"description": "bell\a"}),
		"description wrong type": good(map[string]any{"description": 5}),
	}
	for name, u := range privateURLs {
		cases["private host: "+name] = good(map[string]any{"url": u})
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			r := a.do("POST", hooksPath, admin, body)
			expect(t, r, http.StatusUnprocessableEntity)
		})
	}
	if n := a.rowCount("webhook_subscriptions"); n != 0 {
		t.Fatalf("bad input wrote %d subscriptions", n)
	}

	// The same rules hold for a change, which then changes nothing.
	hook := a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/keep", "events": []string{events.TypePackageRevoked}})
	id := hookID(t, hook)
	patches := map[string]any{
		"malformed JSON":       `{"active": `,
		"url ftp":              map[string]any{"url": "ftp://hooks.example.com/x"},
		"url private":          map[string]any{"url": "http://127.0.0.1/x"},
		"url wrong type":       map[string]any{"url": false},
		"events empty":         map[string]any{"events": []string{}},
		"events unknown":       map[string]any{"events": []string{"package.nope"}},
		"description too long": map[string]any{"description": strings.Repeat("d", 501)},
		"active wrong type":    map[string]any{"active": "false"},
		"active a number":      map[string]any{"active": 0},
		"valid url, bad event": map[string]any{"url": "https://hooks.example.com/new", "events": []string{"x"}},
	}
	for name, body := range patches {
		t.Run("patch "+name, func(t *testing.T) {
			expect(t, a.do("PATCH", hookPath(id, ""), admin, body), http.StatusUnprocessableEntity)
		})
	}
	r := a.do("GET", hookPath(id, ""), admin, nil)
	expect(t, r, http.StatusOK)
	if got := r.json(t); got["url"] != "https://hooks.example.com/keep" || got["active"] != true ||
		!slices.Equal(stringList(got["events"]), []string{events.TypePackageRevoked}) || got["updated_at"] != hook["updated_at"] {
		t.Fatalf("refused patches changed the subscription: %s", r.body)
	}
	if n := a.rowCount("outbox"); n != 0 {
		t.Fatalf("bad input wrote %d outbox rows", n)
	}

	// The limits themselves are fine.
	for _, body := range []map[string]any{
		{"url": "https://hooks.example.com/" + strings.Repeat("a", 2048-len("https://hooks.example.com/"))},
		{"url": "https://hooks.example.com/x", "description": strings.Repeat("é", 500)},
		{"url": "HTTPS://Hooks.Example.com:443/x#frag", "description": "line one\nline two\ttab"},
		{"url": "http://8.8.8.8/x"},
		{"url": "http://[2001:db8::1]:8080/x"},
	} {
		expect(t, a.do("POST", hooksPath, admin, body), http.StatusCreated)
	}
}

func TestWebhookPrivateHostsWhenAllowed(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig(), allowPrivateWebhooks)
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	for name, u := range privateURLs {
		t.Run(name, func(t *testing.T) {
			r := a.do("POST", hooksPath, admin, map[string]any{"url": u})
			expect(t, r, http.StatusCreated)
			if got := r.json(t)["url"]; got != u {
				t.Fatalf("url = %v, want %q", got, u)
			}
		})
	}
	// Malformed URLs are malformed whatever the setting.
	for _, u := range []string{"ftp://127.0.0.1/x", "http://127.1/x", "http://user@localhost/x"} {
		expect(t, a.do("POST", hooksPath, admin, map[string]any{"url": u}), http.StatusUnprocessableEntity)
	}
}
