package httpapi_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

const hooksPath = "/api/v1/admin/webhooks"

var webhookSecret = regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`)

// webhookFields are the keys of a subscription record; the secret is never one of them.
var webhookFields = []string{"id", "url", "description", "events", "active", "disabled_reason", "disabled_at",
	"failing_since", "last_success_at", "max_in_flight", "rate_limit", "ordering", "created_at", "updated_at"}

func (a *testAPI) createWebhook(token string, body map[string]any) map[string]any {
	a.t.Helper()
	r := a.do("POST", hooksPath, token, body)
	expect(a.t, r, http.StatusCreated)
	return r.json(a.t)
}

// hookPath is the path of a subscription (id as the JSON number it came in) plus rest.
func hookPath(id any, rest string) string {
	return fmt.Sprintf("%s/%v%s", hooksPath, id, rest)
}

// insertDelivery writes a delivery of the subscription as the dispatcher would.
func (a *testAPI) insertDelivery(hookID int64, event, status string, attempts int) uuid.UUID {
	a.t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := a.pool.Exec(context.Background(), `INSERT INTO webhook_deliveries
		(id, subscription_id, event_id, event, body, status, attempts, round_attempts)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
		id, hookID, events.NewEventID(), event, []byte(`{"event":"`+event+`"}`), status, attempts)
	if err != nil {
		a.t.Fatal(err)
	}
	return id
}

// insertAttempt writes an attempt of a delivery as the dispatcher would, and returns its id.
func (a *testAPI) insertAttempt(hookID int64, deliveryID uuid.UUID, attempt int, statusCode *int, errText *string) int64 {
	a.t.Helper()
	var id int64
	err := a.pool.QueryRow(context.Background(), `INSERT INTO webhook_attempts
		(delivery_id, subscription_id, attempt, status_code, error, duration_ms, response_excerpt)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
		deliveryID, hookID, attempt, statusCode, errText, 10*attempt, ptr("ok")).Scan(&id)
	if err != nil {
		a.t.Fatal(err)
	}
	return id
}

// outboxRows returns the outbox's rows, oldest first.
func (a *testAPI) outboxRows() []outboxRow {
	a.t.Helper()
	rows, err := a.pool.Query(context.Background(), `SELECT msg_id, subject, payload FROM outbox ORDER BY id`)
	if err != nil {
		a.t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.msgID, &r.subject, &r.payload); err != nil {
			a.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		a.t.Fatal(err)
	}
	return out
}

type outboxRow struct {
	msgID, subject string
	payload        []byte
}

func hookID(t *testing.T, hook map[string]any) int64 {
	t.Helper()
	id, ok := hook["id"].(float64)
	if !ok || id <= 0 || id != float64(int64(id)) {
		t.Fatalf("id = %v, want a positive integer", hook["id"])
	}
	return int64(id)
}

func stringList(v any) []string {
	items, _ := v.([]any)
	out := make([]string, len(items))
	for i, it := range items {
		out[i], _ = it.(string)
	}
	return out
}

// assertSecret checks the shape of a signing secret: whsec_ + base64 of 32 bytes.
func assertSecret(t *testing.T, v any) string {
	t.Helper()
	s, _ := v.(string)
	if !webhookSecret.MatchString(s) {
		t.Fatalf("secret = %q, want whsec_ + standard base64 of 32 bytes", s)
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
	if err != nil || len(b) != 32 {
		t.Fatalf("secret %q decodes to %d bytes (%v), want 32", s, len(b), err)
	}
	return s
}

func TestWebhooksNeedAnAdmin(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	_, regular := a.user("user@example.com", app.RoleRegular)
	hook := a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/a"})
	id := hookID(t, hook)
	delivery := a.insertDelivery(id, events.TypePackageCreated, "failed", 8)

	routes := []struct{ method, path string }{
		{"GET", hooksPath},
		{"POST", hooksPath},
		{"GET", hookPath(id, "")},
		{"PATCH", hookPath(id, "")},
		{"DELETE", hookPath(id, "")},
		{"POST", hookPath(id, "/test")},
		{"POST", hookPath(id, "/rotate-secret")},
		{"GET", hookPath(id, "/deliveries")},
		{"POST", hookPath(id, "/deliveries/"+delivery.String()+"/redeliver")},
	}
	body := map[string]any{"url": "https://hooks.example.com/b", "active": false}
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			r := a.do(rt.method, rt.path, "", body)
			expect(t, r, http.StatusUnauthorized)
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("WWW-Authenticate = %q", r.header.Get("WWW-Authenticate"))
			}
			expect(t, a.do(rt.method, rt.path, regular, body), http.StatusForbidden)
		})
	}
	// Nothing changed: one subscription as created, no events, the delivery still failed.
	r := a.do("GET", hookPath(id, ""), admin, nil)
	expect(t, r, http.StatusOK)
	if got := r.json(t); got["url"] != "https://hooks.example.com/a" || got["active"] != true || got["updated_at"] != hook["updated_at"] {
		t.Fatalf("after refused requests: %s", r.body)
	}
	if n := a.rowCount("webhook_subscriptions"); n != 1 {
		t.Fatalf("subscriptions = %d, want 1", n)
	}
	if n := a.rowCount("outbox"); n != 0 {
		t.Fatalf("refused requests wrote %d outbox rows", n)
	}
}

func TestWebhookCreateAndRead(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)

	r := a.do("POST", hooksPath, admin, map[string]any{"url": "https://hooks.example.com/all"})
	expect(t, r, http.StatusCreated)
	all := r.json(t)
	secret := assertSecret(t, all["secret"])
	if want := append(slices.Clone(webhookFields), "secret"); !sameKeys(all, want) {
		t.Fatalf("creation answer has %v, want %v", keys(all), want)
	}
	allID := hookID(t, all)
	if got := stringList(all["events"]); !slices.Equal(got, events.Types) {
		t.Fatalf("default events = %v, want all %v", got, events.Types)
	}
	if all["url"] != "https://hooks.example.com/all" || all["description"] != "" || all["active"] != true {
		t.Fatalf("created = %s", r.body)
	}
	for _, k := range []string{"disabled_reason", "disabled_at", "failing_since", "last_success_at"} {
		if all[k] != nil {
			t.Errorf("%s = %v, want null", k, all[k])
		}
	}
	assertUTC(t, all["created_at"])
	assertUTC(t, all["updated_at"])

	// A selection is kept without duplicates, in the canonical order.
	some := a.createWebhook(admin, map[string]any{
		"url":         "http://hooks.example.com:8443/some?x=1",
		"events":      []string{events.TypePackageExpired, events.TypePackageCreated, events.TypePackageExpired},
		"description": "CRM sync",
	})
	secret2 := assertSecret(t, some["secret"])
	if secret2 == secret {
		t.Fatal("two subscriptions got the same secret")
	}
	if got := stringList(some["events"]); !slices.Equal(got, []string{events.TypePackageCreated, events.TypePackageExpired}) {
		t.Fatalf("events = %v, want [package.created package.expired]", got)
	}
	if some["description"] != "CRM sync" {
		t.Fatalf("description = %v", some["description"])
	}

	// Later reads never show a secret.
	r = a.do("GET", hooksPath, admin, nil)
	expect(t, r, http.StatusOK)
	for _, s := range []string{secret, secret2, "whsec_", `"secret"`} {
		if strings.Contains(string(r.body), s) {
			t.Fatalf("list shows %q: %s", s, r.body)
		}
	}
	items := r.json(t)["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("items = %d, want 2", len(items))
	}
	first := items[0].(map[string]any)
	if hookID(t, first) != allID || hookID(t, items[1].(map[string]any)) != hookID(t, some) {
		t.Fatalf("list is not oldest first: %s", r.body)
	}
	if !sameKeys(first, webhookFields) {
		t.Fatalf("list item has %v, want %v", keys(first), webhookFields)
	}
	r = a.do("GET", hookPath(allID, ""), admin, nil)
	expect(t, r, http.StatusOK)
	if strings.Contains(string(r.body), secret) || strings.Contains(string(r.body), "whsec_") {
		t.Fatalf("GET shows the secret: %s", r.body)
	}
	got := r.json(t)
	if !sameKeys(got, webhookFields) {
		t.Fatalf("record has %v, want %v", keys(got), webhookFields)
	}
	for _, k := range webhookFields {
		if fmt.Sprint(got[k]) != fmt.Sprint(all[k]) {
			t.Errorf("GET %s = %v, creation answered %v", k, got[k], all[k])
		}
	}

	// The stored secret is the one shown, sealed.
	if stored, _ := a.storedSecrets(allID); stored != secret {
		t.Fatal("the stored secret is not the one shown")
	}

	// An empty list is an empty array.
	b := newTestAPI(t, defaultConfig())
	_, admin2 := b.user("admin@example.com", app.RoleAdmin)
	r = b.do("GET", hooksPath, admin2, nil)
	expect(t, r, http.StatusOK)
	if string(r.body) != `{"items":[]}` {
		t.Fatalf("empty list = %s", r.body)
	}
}

func rfc3339(t *testing.T, v any) time.Time {
	t.Helper()
	assertUTC(t, v)
	ts, _ := time.Parse(time.RFC3339Nano, v.(string))
	return ts
}

func sameKeys(m map[string]any, want []string) bool {
	got := keys(m)
	slices.Sort(got)
	w := slices.Clone(want)
	slices.Sort(w)
	return slices.Equal(got, w)
}

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

func TestWebhookNotFound(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	hook := a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/a"})
	id := hookID(t, hook)
	delivery := a.insertDelivery(id, events.TypePackageCreated, "failed", 8)

	for _, bad := range []string{"999999", "abc", "0", "-1", "1.5", "9223372036854775808"} {
		for _, rt := range []struct{ method, rest string }{
			{"GET", ""}, {"PATCH", ""}, {"DELETE", ""}, {"POST", "/test"}, {"POST", "/rotate-secret"},
			{"GET", "/deliveries"}, {"POST", "/deliveries/" + delivery.String() + "/redeliver"},
		} {
			t.Run(rt.method+" "+bad+rt.rest, func(t *testing.T) {
				expect(t, a.do(rt.method, hookPath(bad, rt.rest), admin, map[string]any{"active": false}), http.StatusNotFound)
			})
		}
	}
	t.Run("unknown delivery", func(t *testing.T) {
		expect(t, a.do("POST", hookPath(id, "/deliveries/"+uuid.NewString()+"/redeliver"), admin, nil), http.StatusNotFound)
	})
	t.Run("malformed delivery id", func(t *testing.T) {
		expect(t, a.do("POST", hookPath(id, "/deliveries/not-a-uuid/redeliver"), admin, nil), http.StatusNotFound)
	})
	if n := a.rowCount("outbox"); n != 0 {
		t.Fatalf("404s wrote %d outbox rows", n)
	}
	r := a.do("GET", hookPath(id, ""), admin, nil)
	expect(t, r, http.StatusOK)
	if r.json(t)["updated_at"] != hook["updated_at"] {
		t.Fatalf("the subscription changed: %s", r.body)
	}
}

func TestWebhookPatch(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	hook := a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/a", "description": "before"})
	id := hookID(t, hook)
	secret := hook["secret"].(string)
	patch := func(body any) map[string]any {
		t.Helper()
		r := a.do("PATCH", hookPath(id, ""), admin, body)
		expect(t, r, http.StatusOK)
		if strings.Contains(string(r.body), secret) || strings.Contains(string(r.body), "whsec_") {
			t.Fatalf("PATCH shows the secret: %s", r.body)
		}
		m := r.json(t)
		if !sameKeys(m, webhookFields) {
			t.Fatalf("PATCH answer has %v", keys(m))
		}
		return m
	}

	t.Run("fields", func(t *testing.T) {
		time.Sleep(2 * time.Millisecond)
		got := patch(map[string]any{
			"url":    "http://hooks.example.com:8080/b",
			"events": []string{events.TypePackageDeleted, events.TypePackageFinalized, events.TypePackageDeleted},
		})
		if got["url"] != "http://hooks.example.com:8080/b" || got["description"] != "before" ||
			!slices.Equal(stringList(got["events"]), []string{events.TypePackageFinalized, events.TypePackageDeleted}) {
			t.Fatalf("after patch: %v", got)
		}
		if got["created_at"] != hook["created_at"] || !rfc3339(t, got["updated_at"]).After(rfc3339(t, hook["updated_at"])) {
			t.Fatalf("created_at %v → %v, updated_at %v → %v", hook["created_at"], got["created_at"], hook["updated_at"], got["updated_at"])
		}
		got = patch(map[string]any{"description": ""})
		if got["description"] != "" || got["url"] != "http://hooks.example.com:8080/b" {
			t.Fatalf("after clearing the description: %v", got)
		}
		// An empty patch changes nothing but is fine.
		if got := patch(map[string]any{}); got["url"] != "http://hooks.example.com:8080/b" || got["active"] != true {
			t.Fatalf("after an empty patch: %v", got)
		}
	})

	t.Run("an admin turns it off and on", func(t *testing.T) {
		off := patch(map[string]any{"active": false})
		if off["active"] != false || off["disabled_reason"] != "disabled by an admin" {
			t.Fatalf("off: %v", off)
		}
		assertUTC(t, off["disabled_at"])
		r := a.do("GET", hookPath(id, ""), admin, nil)
		if got := r.json(t); got["active"] != false || got["disabled_reason"] != "disabled by an admin" || got["disabled_at"] != off["disabled_at"] {
			t.Fatalf("GET after off: %s", r.body)
		}
		// Turning off what is off keeps when and why it went off.
		if again := patch(map[string]any{"active": false}); again["disabled_at"] != off["disabled_at"] || again["disabled_reason"] != "disabled by an admin" {
			t.Fatalf("off again: %v", again)
		}

		if _, err := a.pool.Exec(context.Background(),
			`UPDATE webhook_subscriptions SET failing_since = now() - interval '1 day', last_success_at = now() - interval '2 days' WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		on := patch(map[string]any{"active": true})
		if on["active"] != true || on["disabled_reason"] != nil || on["disabled_at"] != nil || on["failing_since"] != nil {
			t.Fatalf("on: %v", on)
		}
		assertUTC(t, on["last_success_at"]) // the dispatcher's; the admin does not touch it
	})

	t.Run("the dispatcher's reason stays when an admin turns it off too", func(t *testing.T) {
		if _, err := a.pool.Exec(context.Background(), `UPDATE webhook_subscriptions
			SET active = false, disabled_reason = 'the receiver answered 410 Gone', disabled_at = now() WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		got := patch(map[string]any{"active": false, "description": "gone"})
		if got["disabled_reason"] != "the receiver answered 410 Gone" || got["description"] != "gone" {
			t.Fatalf("reason = %v", got["disabled_reason"])
		}
		if on := patch(map[string]any{"active": true}); on["active"] != true || on["disabled_reason"] != nil {
			t.Fatalf("on: %v", on)
		}
	})

	if stored, _ := a.storedSecrets(id); stored != secret {
		t.Fatal("a patch changed the secret")
	}
}

func TestWebhookRotateSecret(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	hook := a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/a"})
	id := hookID(t, hook)
	old := hook["secret"].(string)

	before := time.Now()
	r := a.do("POST", hookPath(id, "/rotate-secret"), admin, nil)
	expect(t, r, http.StatusOK)
	m := r.json(t)
	if len(m) != 1 {
		t.Fatalf("rotation answer = %s, want only {\"secret\"}", r.body)
	}
	secret := assertSecret(t, m["secret"])
	if secret == old {
		t.Fatal("rotation kept the secret")
	}

	var until time.Time
	if err := a.pool.QueryRow(context.Background(),
		`SELECT previous_secret_until FROM webhook_subscriptions WHERE id = $1`, id).Scan(&until); err != nil {
		t.Fatal(err)
	}
	if stored, previous := a.storedSecrets(id); stored != secret || previous != old {
		t.Fatal("the stored secret and previous secret are not the new and the old one")
	}
	if lo, hi := before.Add(24*time.Hour-time.Minute), time.Now().Add(24*time.Hour+time.Minute); until.Before(lo) || until.After(hi) {
		t.Fatalf("previous_secret_until = %v, want about 24h from now", until)
	}

	for _, path := range []string{hooksPath, hookPath(id, "")} {
		r := a.do("GET", path, admin, nil)
		expect(t, r, http.StatusOK)
		for _, s := range []string{secret, old, "whsec_"} {
			if strings.Contains(string(r.body), s) {
				t.Fatalf("GET %s shows a secret: %s", path, r.body)
			}
		}
	}

	// A second rotation moves the current secret to previous.
	r = a.do("POST", hookPath(id, "/rotate-secret"), admin, nil)
	expect(t, r, http.StatusOK)
	third := assertSecret(t, r.json(t)["secret"])
	if stored, previous := a.storedSecrets(id); stored != third || previous != secret {
		t.Fatal("after a second rotation the secret is not the third and the previous not the second")
	}
}

// storedSecrets reads a subscription's secret and previous secret ("" when none) as
// stored, checks that they are sealed under the test key (never in clear), and opens
// them.
func (a *testAPI) storedSecrets(id int64) (secret, previous string) {
	a.t.Helper()
	var sealed string
	var sealedPrev *string
	if err := a.pool.QueryRow(context.Background(),
		`SELECT secret, previous_secret FROM webhook_subscriptions WHERE id = $1`, id).Scan(&sealed, &sealedPrev); err != nil {
		a.t.Fatal(err)
	}
	ring := servicetest.Keyring(a.t)
	open := func(v string) string {
		if !ring.Current(v) || strings.Contains(v, "whsec_") {
			a.t.Fatalf("a webhook secret is stored unsealed: %.12s…", v)
		}
		plain, err := ring.Open(v)
		if err != nil {
			a.t.Fatal(err)
		}
		return plain
	}
	secret = open(sealed)
	if sealedPrev != nil {
		previous = open(*sealedPrev)
	}
	return secret, previous
}

func TestWebhookTest(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	adminUser, admin := a.user("admin@example.com", app.RoleAdmin)
	hook := a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/a", "events": []string{events.TypePackageExpired}})
	id := hookID(t, hook)
	// Test is sent even to an inactive subscription.
	expect(t, a.do("PATCH", hookPath(id, ""), admin, map[string]any{"active": false}), http.StatusOK)

	r := a.do("POST", hookPath(id, "/test"), admin, nil, "User-Agent", "webhook-test/1")
	expect(t, r, http.StatusAccepted)
	m := r.json(t)
	eventID, _ := m["event_id"].(string)
	if len(m) != 1 || eventID == "" {
		t.Fatalf("test answer = %s, want {\"event_id\"}", r.body)
	}
	if u, err := uuid.Parse(eventID); err != nil || u.Version() != 7 {
		t.Fatalf("event_id %q is not a UUIDv7", eventID)
	}

	rows := a.outboxRows()
	if len(rows) != 1 {
		t.Fatalf("outbox rows = %d, want 1", len(rows))
	}
	row := rows[0]
	if row.subject != "shipfile.events.webhook.test" || row.msgID != eventID {
		t.Fatalf("outbox row on %q with msg id %q, want shipfile.events.webhook.test and %q", row.subject, row.msgID, eventID)
	}
	env, err := events.UnmarshalEnvelope(row.payload)
	if err != nil {
		t.Fatal(err)
	}
	wt := env.GetWebhookTest()
	if env.GetEventId() != eventID || env.GetType() != events.TypeWebhookTest || env.GetVersion() != events.Version ||
		wt.GetHookId() != id || wt.GetMessage() != "This is a test delivery from shipfile." {
		t.Fatalf("envelope = %v", env)
	}
	if d := time.Since(env.GetOccurredAt().AsTime()); d < 0 || d > time.Minute {
		t.Fatalf("occurred_at = %v", env.GetOccurredAt().AsTime())
	}

	var actor *int64
	var action, ua string
	var pkg *uuid.UUID
	err = a.pool.QueryRow(context.Background(),
		`SELECT actor_user_id, action, package_id, user_agent FROM audit_log WHERE action = 'webhook.test'`).Scan(&actor, &action, &pkg, &ua)
	if err != nil {
		t.Fatalf("audit entry: %v", err)
	}
	if actor == nil || *actor != adminUser.ID || pkg != nil || ua != "webhook-test/1" {
		t.Fatalf("audit entry: actor %v package %v user agent %q", actor, pkg, ua)
	}
	// The audit log shows the test (beside the entries of the admin's own account).
	r = a.do("GET", "/api/v1/admin/audit", admin, nil)
	tests := 0
	for _, it := range r.json(t)["items"].([]any) {
		if it.(map[string]any)["action"] == "webhook.test" {
			tests++
		}
	}
	if tests != 1 {
		t.Fatalf("audit log = %s, want one webhook.test entry", r.body)
	}

	// Each test is an event of its own.
	r = a.do("POST", hookPath(id, "/test"), admin, nil)
	expect(t, r, http.StatusAccepted)
	if rows := a.outboxRows(); len(rows) != 2 || rows[1].msgID == eventID || rows[1].msgID != r.json(t)["event_id"] {
		t.Fatalf("second test: %d rows", len(rows))
	}
}

func TestWebhookRedeliver(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	id := hookID(t, a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/a"}))
	other := hookID(t, a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/b"}))
	failed := a.insertDelivery(id, events.TypePackageFinalized, "failed", 8)
	untouched := a.insertDelivery(id, events.TypePackageCreated, "failed", 8)
	others := a.insertDelivery(other, events.TypePackageFinalized, "failed", 8)

	r := a.do("POST", hookPath(id, "/deliveries/"+failed.String()+"/redeliver"), admin, nil)
	expect(t, r, http.StatusAccepted)
	if m := r.json(t); len(m) != 1 || m["delivery_id"] != failed.String() {
		t.Fatalf("redeliver answer = %s", r.body)
	}

	state := func(d uuid.UUID) (status string, round, attempts int) {
		t.Helper()
		if err := a.pool.QueryRow(context.Background(),
			`SELECT status, round_attempts, attempts FROM webhook_deliveries WHERE id = $1`, d).Scan(&status, &round, &attempts); err != nil {
			t.Fatal(err)
		}
		return
	}
	if s, round, total := state(failed); s != "pending" || round != 0 || total != 8 {
		t.Fatalf("redelivered: status %s, round_attempts %d, attempts %d; want pending, 0, 8", s, round, total)
	}
	if s, round, _ := state(untouched); s != "failed" || round != 8 {
		t.Fatalf("another delivery changed: %s %d", s, round)
	}

	rows := a.outboxRows()
	if len(rows) != 1 {
		t.Fatalf("outbox rows = %d, want 1", len(rows))
	}
	if want := fmt.Sprintf("shipfile.webhooks.%d", id); rows[0].subject != want {
		t.Fatalf("subject = %q, want %q", rows[0].subject, want)
	}
	if !strings.HasPrefix(rows[0].msgID, failed.String()+"/redeliver/") {
		t.Fatalf("msg id = %q, want %s/redeliver/<id>", rows[0].msgID, failed)
	}
	job, err := events.UnmarshalWebhookJob(rows[0].payload)
	if err != nil {
		t.Fatal(err)
	}
	if job.GetDeliveryId() != failed.String() || job.GetHookId() != id {
		t.Fatalf("job = %v", job)
	}

	// Another subscription's delivery is not found through this one, and nothing is written.
	expect(t, a.do("POST", hookPath(id, "/deliveries/"+others.String()+"/redeliver"), admin, nil), http.StatusNotFound)
	if s, round, _ := state(others); s != "failed" || round != 8 {
		t.Fatalf("another subscription's delivery changed: %s %d", s, round)
	}
	if n := len(a.outboxRows()); n != 1 {
		t.Fatalf("outbox rows = %d after a 404, want 1", n)
	}

	// A second redelivery is a new job (its own message id, not dropped as a duplicate).
	expect(t, a.do("POST", hookPath(id, "/deliveries/"+failed.String()+"/redeliver"), admin, nil), http.StatusAccepted)
	if rows := a.outboxRows(); len(rows) != 2 || rows[1].msgID == rows[0].msgID {
		t.Fatalf("second redelivery: %v", rows)
	}
}

func TestWebhookDeliveries(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	id := hookID(t, a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/a"}))
	other := hookID(t, a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/b"}))

	r := a.do("GET", hookPath(id, "/deliveries"), admin, nil)
	expect(t, r, http.StatusOK)
	if string(r.body) != `{"items":[],"next_cursor":null}` {
		t.Fatalf("empty log = %s", r.body)
	}

	// 3 deliveries: one that failed 8 times, one that succeeded on its second attempt,
	// one still pending after 1 attempt; 25 attempts in all, interleaved with another
	// subscription's.
	failed := a.insertDelivery(id, events.TypePackageCreated, "failed", 8)
	succeeded := a.insertDelivery(id, events.TypePackageFinalized, "succeeded", 2)
	pending := a.insertDelivery(id, events.TypePackageDownloaded, "pending", 1)
	foreign := a.insertDelivery(other, events.TypePackageCreated, "failed", 8)
	type want struct {
		id       int64
		delivery uuid.UUID
		event    string
		attempt  int
		status   string
		code     *int
		err      *string
	}
	var all []want
	add := func(d uuid.UUID, event, status string, attempt int, code *int, errText *string) {
		all = append(all, want{a.insertAttempt(id, d, attempt, code, errText), d, event, attempt, status, code, errText})
		a.insertAttempt(other, foreign, attempt, code, errText)
	}
	for i := 1; i <= 8; i++ {
		add(failed, events.TypePackageCreated, "failed", i, ptr(500), ptr("the receiver answered 500"))
	}
	add(succeeded, events.TypePackageFinalized, "succeeded", 1, nil, ptr("connection refused"))
	add(succeeded, events.TypePackageFinalized, "succeeded", 2, ptr(204), nil)
	add(pending, events.TypePackageDownloaded, "pending", 1, ptr(503), ptr("the receiver answered 503"))
	for i := 0; i < 14; i++ {
		add(failed, events.TypePackageCreated, "failed", 9+i, nil, ptr("timeout"))
	}
	slices.Reverse(all) // newest first

	var eventIDs = map[uuid.UUID]string{}
	for _, d := range []uuid.UUID{failed, succeeded, pending} {
		var e string
		if err := a.pool.QueryRow(context.Background(), `SELECT event_id FROM webhook_deliveries WHERE id = $1`, d).Scan(&e); err != nil {
			t.Fatal(err)
		}
		eventIDs[d] = e
	}

	var seen []map[string]any
	cursor, pages := "", 0
	for {
		path := hookPath(id, "/deliveries?limit=10")
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := a.do("GET", path, admin, nil)
		expect(t, r, http.StatusOK)
		page := r.json(t)
		for _, it := range page["items"].([]any) {
			seen = append(seen, it.(map[string]any))
		}
		pages++
		next, ok := page["next_cursor"].(string)
		if !ok {
			if page["next_cursor"] != nil {
				t.Fatalf("next_cursor = %v", page["next_cursor"])
			}
			break
		}
		cursor = next
	}
	if pages != 3 || len(seen) != len(all) {
		t.Fatalf("pages = %d, items = %d; want 3 pages of %d items", pages, len(seen), len(all))
	}
	fields := []string{"id", "delivery_id", "event_id", "event", "attempt", "status_code", "error", "duration_ms",
		"response_excerpt", "created_at", "delivery_status"}
	for i, got := range seen {
		w := all[i]
		if !sameKeys(got, fields) {
			t.Fatalf("item has %v, want %v", keys(got), fields)
		}
		if got["id"] != float64(w.id) || got["delivery_id"] != w.delivery.String() || got["event_id"] != eventIDs[w.delivery] ||
			got["event"] != w.event || got["attempt"] != float64(w.attempt) || got["delivery_status"] != w.status ||
			got["duration_ms"] != float64(10*w.attempt) || got["response_excerpt"] != "ok" {
			t.Fatalf("item %d = %v, want %+v", i, got, w)
		}
		if (w.code == nil) != (got["status_code"] == nil) || (w.code != nil && got["status_code"] != float64(*w.code)) {
			t.Fatalf("item %d status_code = %v, want %v", i, got["status_code"], w.code)
		}
		if (w.err == nil) != (got["error"] == nil) || (w.err != nil && got["error"] != *w.err) {
			t.Fatalf("item %d error = %v, want %v", i, got["error"], w.err)
		}
		assertUTC(t, got["created_at"])
	}

	r = a.do("GET", hookPath(id, "/deliveries"), admin, nil)
	if n := len(r.json(t)["items"].([]any)); n != 20 {
		t.Fatalf("default page = %d, want 20", n)
	}
	r = a.do("GET", hookPath(id, "/deliveries?limit=100"), admin, nil)
	if page := r.json(t); len(page["items"].([]any)) != 25 || page["next_cursor"] != nil {
		t.Fatalf("limit=100: %d items, next_cursor %v", len(page["items"].([]any)), page["next_cursor"])
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "limit=", "cursor=x", "cursor=-5", "cursor=0"} {
		expect(t, a.do("GET", hookPath(id, "/deliveries?"+q), admin, nil), http.StatusUnprocessableEntity)
	}
}

func TestWebhookDelete(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	id := hookID(t, a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/a"}))
	keep := hookID(t, a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/b"}))
	for _, h := range []int64{id, keep} {
		for range 2 {
			d := a.insertDelivery(h, events.TypePackageCreated, "failed", 2)
			a.insertAttempt(h, d, 1, ptr(500), nil)
			a.insertAttempt(h, d, 2, ptr(500), nil)
		}
	}

	r := a.do("DELETE", hookPath(id, ""), admin, nil)
	expect(t, r, http.StatusNoContent)
	if len(r.body) != 0 {
		t.Fatalf("204 with a body: %s", r.body)
	}
	expect(t, a.do("GET", hookPath(id, ""), admin, nil), http.StatusNotFound)
	expect(t, a.do("GET", hookPath(id, "/deliveries"), admin, nil), http.StatusNotFound)
	expect(t, a.do("DELETE", hookPath(id, ""), admin, nil), http.StatusNotFound)

	count := func(table string, hook int64) int {
		t.Helper()
		var n int
		if err := a.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE subscription_id = $1", hook).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if d, at := count("webhook_deliveries", id), count("webhook_attempts", id); d != 0 || at != 0 {
		t.Fatalf("after delete: %d deliveries, %d attempts left", d, at)
	}
	if d, at := count("webhook_deliveries", keep), count("webhook_attempts", keep); d != 2 || at != 4 {
		t.Fatalf("the other subscription has %d deliveries, %d attempts; want 2 and 4", d, at)
	}
	r = a.do("GET", hooksPath, admin, nil)
	if items := r.json(t)["items"].([]any); len(items) != 1 || hookID(t, items[0].(map[string]any)) != keep {
		t.Fatalf("list after delete = %s", r.body)
	}
}

// TestWebhookThroughputSettings: max_in_flight (1–256, default 16) and rate_limit
// (1–10000 or null) on create and PATCH, validated with 422; "all events" is stored as
// such (NULL) and answered expanded.
func TestWebhookThroughputSettings(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	storedEvents := func(id int64) []string {
		t.Helper()
		var evs []string
		if err := a.pool.QueryRow(context.Background(), `SELECT events FROM webhook_subscriptions WHERE id = $1`, id).Scan(&evs); err != nil {
			t.Fatal(err)
		}
		return evs
	}

	def := a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/a"})
	if def["max_in_flight"] != float64(16) || def["rate_limit"] != nil {
		t.Fatalf("defaults: max_in_flight %v, rate_limit %v", def["max_in_flight"], def["rate_limit"])
	}
	if evs := storedEvents(hookID(t, def)); evs != nil {
		t.Fatalf("all events stored as %v, want NULL", evs)
	}
	if got := stringList(def["events"]); !slices.Equal(got, events.Types) {
		t.Fatalf("all events answered as %v, want them expanded", got)
	}
	set := a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/b", "max_in_flight": 256, "rate_limit": 10000,
		"events": []string{events.TypePackageCreated}})
	if set["max_in_flight"] != float64(256) || set["rate_limit"] != float64(10000) {
		t.Fatalf("set: %v %v", set["max_in_flight"], set["rate_limit"])
	}
	id := hookID(t, set)
	if evs := storedEvents(id); !slices.Equal(evs, []string{events.TypePackageCreated}) {
		t.Fatalf("a selection stored as %v", evs)
	}

	patch := func(body any, status int) map[string]any {
		t.Helper()
		r := a.do("PATCH", hookPath(id, ""), admin, body)
		expect(t, r, status)
		return r.json(t)
	}
	if got := patch(map[string]any{"max_in_flight": 1, "rate_limit": 1}, http.StatusOK); got["max_in_flight"] != float64(1) || got["rate_limit"] != float64(1) {
		t.Fatalf("patched: %v", got)
	}
	if got := patch(map[string]any{"description": "x"}, http.StatusOK); got["max_in_flight"] != float64(1) || got["rate_limit"] != float64(1) {
		t.Fatalf("a patch without them changed them: %v", got)
	}
	if got := patch(map[string]any{"rate_limit": nil}, http.StatusOK); got["rate_limit"] != nil || got["max_in_flight"] != float64(1) {
		t.Fatalf("rate_limit null: %v", got)
	}
	for name, body := range map[string]any{
		"max_in_flight 0":      map[string]any{"max_in_flight": 0},
		"max_in_flight 300":    map[string]any{"max_in_flight": 300},
		"max_in_flight null":   map[string]any{"max_in_flight": "x"},
		"rate_limit 0":         map[string]any{"rate_limit": 0},
		"rate_limit too big":   map[string]any{"rate_limit": 10001},
		"rate_limit a string":  map[string]any{"rate_limit": "10"},
		"rate_limit an object": map[string]any{"rate_limit": map[string]any{}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := patch(body, http.StatusUnprocessableEntity); got["detail"] == nil || got["detail"] == "" {
				t.Fatalf("no detail: %v", got)
			}
		})
	}
	// Choosing every event type again is choosing all.
	if got := patch(map[string]any{"events": events.Types}, http.StatusOK); !slices.Equal(stringList(got["events"]), events.Types) {
		t.Fatalf("events: %v", got["events"])
	}
	if evs := storedEvents(id); evs != nil {
		t.Fatalf("every event type stored as %v, want NULL (all)", evs)
	}
}

// TestWebhookOrdering: ordering is "none" by default, "package" on create and PATCH,
// shown on the record and stored; any other value is 422 and changes nothing.
func TestWebhookOrdering(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	stored := func(id int64) string {
		t.Helper()
		var o string
		if err := a.pool.QueryRow(context.Background(), `SELECT ordering FROM webhook_subscriptions WHERE id = $1`, id).Scan(&o); err != nil {
			t.Fatal(err)
		}
		return o
	}

	def := a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/a"})
	if def["ordering"] != "none" || stored(hookID(t, def)) != "none" {
		t.Fatalf("default ordering %v (stored %q), want none", def["ordering"], stored(hookID(t, def)))
	}
	ordered := a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/b", "ordering": "package"})
	id := hookID(t, ordered)
	if ordered["ordering"] != "package" || stored(id) != "package" {
		t.Fatalf("created ordering %v (stored %q), want package", ordered["ordering"], stored(id))
	}
	r := a.do("GET", hookPath(id, ""), admin, nil)
	expect(t, r, http.StatusOK)
	if got := r.json(t)["ordering"]; got != "package" {
		t.Fatalf("GET ordering %v", got)
	}

	patch := func(body any, status int) map[string]any {
		t.Helper()
		r := a.do("PATCH", hookPath(id, ""), admin, body)
		expect(t, r, status)
		return r.json(t)
	}
	if got := patch(map[string]any{"description": "x"}, http.StatusOK); got["ordering"] != "package" {
		t.Fatalf("a patch without ordering changed it: %v", got["ordering"])
	}
	if got := patch(map[string]any{"ordering": "none"}, http.StatusOK); got["ordering"] != "none" || stored(id) != "none" {
		t.Fatalf("patched to none: %v (stored %q)", got["ordering"], stored(id))
	}
	if got := patch(map[string]any{"ordering": "package", "max_in_flight": 4}, http.StatusOK); got["ordering"] != "package" || got["max_in_flight"] != float64(4) {
		t.Fatalf("patched to package: %v", got)
	}
	for name, body := range map[string]any{
		"unknown":  map[string]any{"ordering": "fifo"},
		"empty":    map[string]any{"ordering": ""},
		"a number": map[string]any{"ordering": 2},
	} {
		t.Run(name, func(t *testing.T) {
			if got := patch(body, http.StatusUnprocessableEntity); got["detail"] == nil || got["detail"] == "" {
				t.Fatalf("no detail: %v", got)
			}
			if stored(id) != "package" {
				t.Fatalf("a refused patch changed the ordering to %q", stored(id))
			}
		})
	}
}
