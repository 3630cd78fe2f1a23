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
