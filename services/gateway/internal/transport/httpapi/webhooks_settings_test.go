package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

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
