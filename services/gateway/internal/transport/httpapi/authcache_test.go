package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/store/identitydb"
)

// revocationDeadline is how soon a change made through one gateway (or in the database)
// must reach every gateway's token cache.
const revocationDeadline = time.Second

// twoGateways starts two gateways (two app graphs and servers) on one database.
func twoGateways(t *testing.T) (*testAPI, *testAPI) {
	t.Helper()
	a := newTestAPI(t, defaultConfig())
	b := newTestAPI(t, defaultConfig(), onDatabase(a.dbURL))
	return a, b
}

// cached uses token on a until a's cache holds it (its change feed is up), so that a
// later answer shows whether the cache forgot it.
func (a *testAPI) cached(t *testing.T, token string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		expect(t, a.do("GET", "/api/v1/me", token, nil), http.StatusOK)
		if a.tokenCache.Holds(token) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway's token cache never took the token: is its change feed up?")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// untilStatus polls path with token on g until it answers want, and fails when that
// takes longer than within (measured from since).
func untilStatus(t *testing.T, g *testAPI, path, token string, want int, since time.Time, within time.Duration) {
	t.Helper()
	for {
		r := g.do("GET", path, token, nil)
		if r.status == want {
			if took := time.Since(since); took > within {
				t.Fatalf("GET %s answered %d after %s, want within %s", path, want, took.Round(time.Millisecond), within)
			}
			return
		}
		if time.Since(since) > within {
			t.Fatalf("GET %s still answers %d (%s) %s after the change, want %d within %s", path, r.status, r.body,
				time.Since(since).Round(time.Millisecond), want, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTokenChangesReachEveryGateway(t *testing.T) {
	t.Parallel()
	a, b := twoGateways(t)
	_, adminToken := a.user("admin@example.com", app.RoleAdmin)
	ctx := context.Background()

	cases := []struct {
		name string
		// path is requested on both gateways; it answers 200 before the change.
		path string
		// change is made once both gateways hold the token in their caches.
		change func(t *testing.T, u app.User, tokenID int64)
		want   int
	}{
		{"token revoked through the API of one gateway", "/api/v1/me", func(t *testing.T, u app.User, tokenID int64) {
			// The user revokes it with another of their tokens.
			_, other, err := a.identity.CreateToken(ctx, u.ID, "other", nil, identity.System)
			if err != nil {
				t.Fatal(err)
			}
			expect(t, a.do("DELETE", fmt.Sprintf("/api/v1/me/tokens/%d", tokenID), other, nil), http.StatusNoContent)
		}, http.StatusUnauthorized},
		{"user disabled by an admin", "/api/v1/me", func(t *testing.T, u app.User, _ int64) {
			expect(t, a.do("PATCH", fmt.Sprintf("/api/v1/admin/users/%d", u.ID), adminToken, map[string]any{"disabled": true}), http.StatusOK)
		}, http.StatusUnauthorized},
		{"admin role taken away", "/api/v1/admin/users", func(t *testing.T, u app.User, _ int64) {
			expect(t, a.do("PATCH", fmt.Sprintf("/api/v1/admin/users/%d", u.ID), adminToken, map[string]any{"role": "regular"}), http.StatusOK)
		}, http.StatusForbidden},
		{"password changed", "/api/v1/me", func(t *testing.T, u app.User, _ int64) {
			// Not a revocation: the token keeps working, with the fresh user.
			expect(t, a.do("PATCH", fmt.Sprintf("/api/v1/admin/users/%d", u.ID), adminToken, map[string]any{"password": "a new password"}), http.StatusOK)
		}, http.StatusOK},
		{"token deleted in the database (shipctl, plain SQL)", "/api/v1/me", func(t *testing.T, _ app.User, tokenID int64) {
			if _, err := a.pool.Exec(ctx, `DELETE FROM api_tokens WHERE id = $1`, tokenID); err != nil {
				t.Fatal(err)
			}
		}, http.StatusUnauthorized},
		{"user disabled in the database", "/api/v1/me", func(t *testing.T, u app.User, _ int64) {
			if _, err := a.pool.Exec(ctx, `UPDATE users SET disabled = true WHERE id = $1`, u.ID); err != nil {
				t.Fatal(err)
			}
		}, http.StatusUnauthorized},
		{"token's expiry moved into the past in the database", "/api/v1/me", func(t *testing.T, _ app.User, tokenID int64) {
			if _, err := a.pool.Exec(ctx, `UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, tokenID); err != nil {
				t.Fatal(err)
			}
		}, http.StatusUnauthorized},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := a.identity.CreateUser(ctx, app.NewUser{Email: fmt.Sprintf("u%d@example.com", i), Name: "U", Role: app.RoleAdmin})
			if err != nil {
				t.Fatal(err)
			}
			tok, raw, err := a.identity.CreateToken(ctx, u.ID, "ci", nil, identity.System)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range []*testAPI{a, b} {
				g.cached(t, raw)
				expect(t, g.do("GET", tc.path, raw, nil), http.StatusOK)
			}
			tc.change(t, u, tok.ID)
			changed := time.Now()
			for _, g := range []*testAPI{b, a} {
				untilStatus(t, g, tc.path, raw, tc.want, changed, revocationDeadline)
			}
		})
	}
}

// TestExpiredTokenStopsAtExpiry: a cached token stops working at its expires_at, with
// no notification at all.
func TestExpiredTokenStopsAtExpiry(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	u, _ := a.user("owner@example.com", app.RoleRegular)
	expiresAt := time.Now().Add(1500 * time.Millisecond)
	_, raw, err := a.identity.CreateToken(context.Background(), u.ID, "short", &expiresAt, identity.System)
	if err != nil {
		t.Fatal(err)
	}
	a.cached(t, raw)
	time.Sleep(time.Until(expiresAt))
	expect(t, a.do("GET", "/api/v1/me", raw, nil), http.StatusUnauthorized)
}

// TestTokenCacheFailsSafeWhenFeedDrops: the change feed's connection is cut and a token
// is revoked while it is down (its notification is lost); the cache empties, and after
// the feed reconnects the revoked token is refused, not served from memory.
func TestTokenCacheFailsSafeWhenFeedDrops(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	u, raw := a.user("owner@example.com", app.RoleRegular)
	a.cached(t, raw)
	feedPID := func() int {
		var pid int
		if err := a.pool.QueryRow(context.Background(), `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1`, identitydb.AuthFeedAppName).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	pid := feedPID()
	if pid == 0 {
		t.Fatal("no auth feed connection")
	}
	// Revoke in the same transaction that cuts the feed, so the feed cannot hear it.
	tx, err := a.pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `DELETE FROM api_tokens WHERE user_id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	untilStatus(t, a, "/api/v1/me", raw, http.StatusUnauthorized, changed, revocationDeadline)
	deadline := time.Now().Add(10 * time.Second)
	for p := feedPID(); p == 0 || p == pid; p = feedPID() {
		if time.Now().After(deadline) {
			t.Fatal("the auth feed did not reconnect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Back on: a valid token is cached again, the revoked one stays refused.
	_, other := a.user("other@example.com", app.RoleRegular)
	a.cached(t, other)
	expect(t, a.do("GET", "/api/v1/me", raw, nil), http.StatusUnauthorized)
}
