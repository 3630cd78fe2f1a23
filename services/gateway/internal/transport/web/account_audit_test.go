package web_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Sign-ins, failed sign-ins and sign-outs are in the audit log: a failed one counted
// in one row per IP and hour, so guessing does not grow the log.
func TestSignInsAudited(t *testing.T) {
	e := newEnv(t)
	u := e.user("ann@example.com", app.RoleRegular)
	ctx := context.Background()
	entries := func(action string) (rows, hits int) {
		t.Helper()
		if err := e.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(hits), 0) FROM audit_log WHERE action = $1`, action).Scan(&rows, &hits); err != nil {
			t.Fatal(err)
		}
		return rows, hits
	}
	b := e.browser()
	b.get("/login")
	for range 3 {
		expectStatus(t, b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"not the password"}}), http.StatusUnauthorized)
	}
	if rows, hits := entries("session.sign_in_failed"); rows != 1 || hits != 3 {
		t.Fatalf("failed sign-ins: %d rows, %d hits; want 1 row of 3", rows, hits)
	}
	b.login("ann@example.com")
	var actor int64
	var detail string
	if err := e.pool.QueryRow(ctx, `SELECT actor_user_id, detail FROM audit_log WHERE action = 'session.sign_in'`).Scan(&actor, &detail); err != nil ||
		actor != u.ID || detail != "password" {
		t.Fatalf("sign-in entry: user %d, %q, %v", actor, detail, err)
	}
	b.get("/")
	expectStatus(t, b.post("/logout", url.Values{}), http.StatusSeeOther)
	if rows, _ := entries("session.sign_out"); rows != 1 {
		t.Fatalf("%d sign-out entries", rows)
	}
}
