package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
)

func TestHealthNeedsNoToken(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	r := a.do("GET", "/api/v1/health", "", nil)
	expect(t, r, http.StatusOK)
	if r.json(t)["status"] != "ok" {
		t.Fatalf("health body = %s", r.body)
	}
	expect(t, a.do("GET", "/healthz", "", nil), http.StatusOK)
	// /readyz and /metrics are on the ops address only: TestOpsEndpointsNotPublic.
}

func TestUnauthenticated(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	u, valid := a.user("owner@example.com", app.RoleRegular)
	ctx := context.Background()

	_, expiring, err := a.identity.CreateToken(ctx, u.ID, "soon", ptr(time.Now().Add(time.Hour)), identity.System)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.pool.Exec(ctx, "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE name = 'soon'"); err != nil {
		t.Fatal(err)
	}
	revoked, revokedRaw, err := a.identity.CreateToken(ctx, u.ID, "revoked", nil, identity.System)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, a.do("DELETE", fmt.Sprintf("/api/v1/me/tokens/%d", revoked.ID), valid, nil), http.StatusNoContent)

	disabled, disabledToken := a.user("gone@example.com", app.RoleRegular)
	expect(t, a.do("GET", "/api/v1/me", disabledToken, nil), http.StatusOK)
	if _, err := a.identity.UpdateUser(ctx, disabled.ID, app.UserPatch{Disabled: ptr(true)}, identity.System); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		header string
	}{
		{"missing header", ""},
		{"wrong scheme", "Basic " + valid},
		{"empty bearer", "Bearer "},
		{"malformed token", "Bearer sf_short"},
		{"unknown token", "Bearer sf_" + strings.Repeat("A", 43)},
		{"expired token", "Bearer " + expiring},
		{"revoked token", "Bearer " + revokedRaw},
		{"disabled user", "Bearer " + disabledToken},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := a.do("GET", "/api/v1/me", "", nil, "Authorization", tc.header)
			expect(t, r, http.StatusUnauthorized)
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("WWW-Authenticate = %q", r.header.Get("WWW-Authenticate"))
			}
		})
	}
	expect(t, a.do("GET", "/api/v1/me", valid, nil), http.StatusOK)
}

func TestMe(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	u, token := a.user("Me@Example.com", app.RoleAdmin)
	r := a.do("GET", "/api/v1/me", token, nil)
	expect(t, r, http.StatusOK)
	m := r.json(t)
	want := map[string]any{"id": float64(u.ID), "email": "Me@Example.com", "name": u.Name, "role": "admin"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("me[%q] = %v, want %v", k, m[k], v)
		}
	}
	if v, ok := m["language"]; !ok || v != nil {
		t.Errorf("me[language] = %v (present %v), want null", v, ok)
	}
	if len(m) != 6 {
		t.Errorf("me has fields %v, want id, email, name, role, created_at, language", keys(m))
	}
	assertUTC(t, m["created_at"])
}

var rawToken = regexp.MustCompile(`^sf_[A-Za-z0-9_-]{43}$`)

func TestTokens(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	_, otherToken := a.user("other@example.com", app.RoleRegular)

	r := a.do("POST", "/api/v1/me/tokens", token, map[string]any{"name": "ci", "expires_at": "2099-01-01T00:00:00Z"})
	expect(t, r, http.StatusCreated)
	created := r.json(t)
	raw, _ := created["token"].(string)
	if !rawToken.MatchString(raw) || len(raw) != 46 {
		t.Fatalf("token = %q, want sf_ + 43 base64url characters", raw)
	}
	if created["prefix"] != raw[:11] {
		t.Fatalf("prefix = %v, want %q", created["prefix"], raw[:11])
	}
	if created["name"] != "ci" || created["expires_at"] != "2099-01-01T00:00:00Z" || created["last_used_at"] != nil {
		t.Fatalf("created = %s", r.body)
	}
	if _, ok := created["id"].(float64); !ok {
		t.Fatalf("id = %v, want an integer", created["id"])
	}
	assertUTC(t, created["created_at"])
	for _, k := range []string{"id", "name", "prefix", "token", "created_at", "expires_at", "last_used_at"} {
		if _, ok := created[k]; !ok {
			t.Errorf("creation answer lacks %q", k)
		}
	}

	// The new token works, and using it records last_used_at.
	expect(t, a.do("GET", "/api/v1/me", raw, nil), http.StatusOK)
	r = a.do("GET", "/api/v1/me/tokens", token, nil)
	expect(t, r, http.StatusOK)
	items := r.json(t)["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("items = %d, want 2", len(items))
	}
	first := items[0].(map[string]any)
	if first["name"] != "ci" {
		t.Fatalf("newest first: got %v", first["name"])
	}
	if _, ok := first["token"]; ok {
		t.Fatal("list shows the raw token")
	}
	if first["last_used_at"] == nil {
		t.Fatal("last_used_at not set after use")
	}
	assertUTC(t, first["last_used_at"])

	id := int64(created["id"].(float64))
	expect(t, a.do("DELETE", fmt.Sprintf("/api/v1/me/tokens/%d", id), otherToken, nil), http.StatusNotFound)
	expect(t, a.do("DELETE", "/api/v1/me/tokens/abc", token, nil), http.StatusNotFound)
	expect(t, a.do("DELETE", "/api/v1/me/tokens/999999", token, nil), http.StatusNotFound)
	expect(t, a.do("DELETE", fmt.Sprintf("/api/v1/me/tokens/%d", id), token, nil), http.StatusNoContent)
	expect(t, a.do("GET", "/api/v1/me", raw, nil), http.StatusUnauthorized)
	r = a.do("GET", "/api/v1/me/tokens", token, nil)
	if n := len(r.json(t)["items"].([]any)); n != 1 {
		t.Fatalf("after revoke: %d tokens, want 1", n)
	}
}

func TestCreateTokenRejectsBadInput(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	cases := []struct {
		name   string
		body   any
		status int
	}{
		{"malformed json", `{"name": "ci"`, 422},
		{"not json", `name=ci`, 422},
		{"empty body", ``, 422},
		{"array", `[]`, 422},
		{"null", `null`, 422},
		{"two objects", `{"name":"a"}{"name":"b"}`, 422},
		{"name missing", map[string]any{}, 422},
		{"name wrong type", map[string]any{"name": 42}, 422},
		{"name empty", map[string]any{"name": ""}, 422},
		{"name blank", map[string]any{"name": "   "}, 422},
		{"name too long", map[string]any{"name": strings.Repeat("x", 101)}, 422},
		{"name control chars", map[string]any{"name": "a\x00b"}, 422},
		{"expiry in the past", map[string]any{"name": "ci", "expires_at": "2001-01-01T00:00:00Z"}, 422},
		{"expiry not a date", map[string]any{"name": "ci", "expires_at": "tomorrow"}, 422},
		{"expiry wrong type", map[string]any{"name": "ci", "expires_at": 12}, 422},
		{"too large", `{"name": "` + strings.Repeat("x", 2<<20) + `"}`, 413},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, a.do("POST", "/api/v1/me/tokens", token, tc.body), tc.status)
		})
	}
	t.Run("wrong content type", func(t *testing.T) {
		expect(t, a.do("POST", "/api/v1/me/tokens", token, nil, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType)
	})
	t.Run("name of 100 characters is fine", func(t *testing.T) {
		expect(t, a.do("POST", "/api/v1/me/tokens", token, map[string]any{"name": strings.Repeat("é", 100)}), http.StatusCreated)
	})
	var n int
	if err := a.pool.QueryRow(context.Background(), "SELECT count(*) FROM api_tokens").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 { // the user's own token and the one valid creation
		t.Fatalf("api_tokens rows = %d, want 2: bad input wrote something", n)
	}
}

func TestAdminUsers(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	regular, regularToken := a.user("regular@example.com", app.RoleRegular)

	t.Run("regular users are forbidden", func(t *testing.T) {
		expect(t, a.do("GET", "/api/v1/admin/users", regularToken, nil), http.StatusForbidden)
		expect(t, a.do("POST", "/api/v1/admin/users", regularToken, map[string]any{"email": "x@example.com", "name": "X"}), http.StatusForbidden)
		expect(t, a.do("PATCH", fmt.Sprintf("/api/v1/admin/users/%d", regular.ID), regularToken, map[string]any{"role": "admin"}), http.StatusForbidden)
		expect(t, a.do("GET", "/api/v1/admin/users", "", nil), http.StatusUnauthorized)
	})

	r := a.do("POST", "/api/v1/admin/users", admin, map[string]any{"email": "ana@example.com", "name": "Ana", "role": "regular", "password": "correct-horse"})
	expect(t, r, http.StatusCreated)
	ana := r.json(t)
	if ana["email"] != "ana@example.com" || ana["name"] != "Ana" || ana["role"] != "regular" || ana["disabled"] != false {
		t.Fatalf("created user = %s", r.body)
	}
	if _, leaked := ana["password"]; leaked {
		t.Fatal("user record shows the password")
	}
	assertUTC(t, ana["created_at"])
	anaID := int64(ana["id"].(float64))

	t.Run("duplicate email in another case", func(t *testing.T) {
		expect(t, a.do("POST", "/api/v1/admin/users", admin, map[string]any{"email": "ANA@example.COM", "name": "Ana 2"}), http.StatusConflict)
		expect(t, a.do("PATCH", fmt.Sprintf("/api/v1/admin/users/%d", regular.ID), admin, map[string]any{"email": "Ana@Example.com"}), http.StatusConflict)
	})

	invalid := []struct {
		name string
		body any
	}{
		{"malformed", `{"email":`},
		{"email missing", map[string]any{"name": "X"}},
		{"email invalid", map[string]any{"email": "not-an-address", "name": "X"}},
		{"email with display name", map[string]any{"email": "X <x@example.com>", "name": "X"}},
		{"name missing", map[string]any{"email": "x@example.com"}},
		{"name too long", map[string]any{"email": "x@example.com", "name": strings.Repeat("n", 101)}},
		{"role unknown", map[string]any{"email": "x@example.com", "name": "X", "role": "root"}},
		{"password short", map[string]any{"email": "x@example.com", "name": "X", "password": "short"}},
		{"password empty", map[string]any{"email": "x@example.com", "name": "X", "password": ""}},
		{"role wrong type", map[string]any{"email": "x@example.com", "name": "X", "role": true}},
	}
	for _, tc := range invalid {
		t.Run("create: "+tc.name, func(t *testing.T) {
			expect(t, a.do("POST", "/api/v1/admin/users", admin, tc.body), http.StatusUnprocessableEntity)
		})
	}

	r = a.do("GET", "/api/v1/admin/users", admin, nil)
	expect(t, r, http.StatusOK)
	if n := len(r.json(t)["items"].([]any)); n != 3 {
		t.Fatalf("users = %d, want 3 (bad input must write nothing)", n)
	}

	path := fmt.Sprintf("/api/v1/admin/users/%d", anaID)
	r = a.do("PATCH", path, admin, map[string]any{"role": "admin", "name": "Ana B"})
	expect(t, r, http.StatusOK)
	if m := r.json(t); m["role"] != "admin" || m["name"] != "Ana B" || m["email"] != "ana@example.com" {
		t.Fatalf("patched = %s", r.body)
	}
	for _, tc := range []struct {
		name string
		body any
	}{
		{"role unknown", map[string]any{"role": "boss"}},
		{"name empty", map[string]any{"name": ""}},
		{"password short", map[string]any{"password": "123"}},
		{"disabled wrong type", map[string]any{"disabled": "yes"}},
		{"email invalid", map[string]any{"email": "nope"}},
	} {
		t.Run("patch: "+tc.name, func(t *testing.T) {
			expect(t, a.do("PATCH", path, admin, tc.body), http.StatusUnprocessableEntity)
		})
	}
	expect(t, a.do("PATCH", "/api/v1/admin/users/999999", admin, map[string]any{"name": "x"}), http.StatusNotFound)
	expect(t, a.do("PATCH", "/api/v1/admin/users/x", admin, map[string]any{"name": "x"}), http.StatusNotFound)

	t.Run("disabling a user stops their tokens at once", func(t *testing.T) {
		expect(t, a.do("GET", "/api/v1/me", regularToken, nil), http.StatusOK)
		r := a.do("PATCH", fmt.Sprintf("/api/v1/admin/users/%d", regular.ID), admin, map[string]any{"disabled": true})
		expect(t, r, http.StatusOK)
		if r.json(t)["disabled"] != true {
			t.Fatalf("patched = %s", r.body)
		}
		expect(t, a.do("GET", "/api/v1/me", regularToken, nil), http.StatusUnauthorized)
		expect(t, a.do("PATCH", fmt.Sprintf("/api/v1/admin/users/%d", regular.ID), admin, map[string]any{"disabled": false}), http.StatusOK)
		expect(t, a.do("GET", "/api/v1/me", regularToken, nil), http.StatusOK)
	})

	t.Run("password change lets the user sign in", func(t *testing.T) {
		expect(t, a.do("PATCH", path, admin, map[string]any{"password": "a-new-long-password"}), http.StatusOK)
		if _, err := a.identity.CheckPassword(context.Background(), "ANA@example.com", "a-new-long-password"); err != nil {
			t.Fatalf("sign in with the new password: %v", err)
		}
		if _, err := a.identity.CheckPassword(context.Background(), "ana@example.com", "correct-horse"); err == nil {
			t.Fatal("old password still works")
		}
	})
}

func TestErrorFrame(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	a.engine.GET("/api/v1/test-panic", func(c *gin.Context) { panic("boom: secret stack") })
	_, token := a.user("owner@example.com", app.RoleRegular)

	expect(t, a.do("GET", "/api/v1/no-such-route", token, nil), http.StatusNotFound)
	expect(t, a.do("GET", "/api/v1/no-such-route", "", nil), http.StatusNotFound)
	expect(t, a.do("PUT", "/api/v1/me", token, nil), http.StatusMethodNotAllowed)
	expect(t, a.do("DELETE", "/api/v1/health", "", nil), http.StatusMethodNotAllowed)
	r := a.do("GET", "/api/v1/test-panic", "", nil)
	expect(t, r, http.StatusInternalServerError)
	if strings.Contains(string(r.body), "boom") || strings.Contains(string(r.body), "goroutine") {
		t.Fatalf("500 leaks the panic: %s", r.body)
	}
	// Pages outside the API answer with an HTML error page.
	r = a.do("GET", "/no-such-page", "", nil)
	if r.status != http.StatusNotFound || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("page 404: %d %s", r.status, r.header.Get("Content-Type"))
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.RatePerSecond, cfg.RateBurst = 0.5, 3
	a := newTestAPI(t, cfg)
	_, token := a.user("busy@example.com", app.RoleRegular)
	_, other := a.user("calm@example.com", app.RoleRegular)
	for range 3 {
		expect(t, a.do("GET", "/api/v1/me", token, nil), http.StatusOK)
	}
	r := a.do("GET", "/api/v1/me", token, nil)
	expect(t, r, http.StatusTooManyRequests)
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After = %q", ra)
	}
	// Another token has its own budget.
	expect(t, a.do("GET", "/api/v1/me", other, nil), http.StatusOK)
}
