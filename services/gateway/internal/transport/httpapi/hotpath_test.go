package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// TestRequestsLockNoSharedRow: while another transaction holds the caller's user row
// and token row locked FOR UPDATE, the token still authenticates and packages are
// still created. Nothing on that path writes or locks a row shared by all requests of
// a token or all packages of a user (no last_used_at update per request, no foreign-key
// lock on the owner's users row), so concurrent requests never queue on one.
func TestRequestsLockNoSharedRow(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	u, token := a.user("owner@example.com", app.RoleRegular)
	ctx := context.Background()
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM api_tokens WHERE user_id = $1 FOR UPDATE`, u.ID); err != nil {
		t.Fatal(err)
	}

	done := make(chan response, 1)
	go func() {
		// The token's first use (a look-up, not cached yet) and two creations.
		var r response
		for range 3 {
			if r = a.do("POST", "/api/v1/packages", token, map[string]any{"title": "t", "recipient_email": "r@example.com"}); r.status != http.StatusCreated {
				break
			}
		}
		done <- r
	}()
	select {
	case r := <-done:
		expect(t, r, http.StatusCreated)
	case <-time.After(5 * time.Second):
		_ = tx.Rollback(ctx)
		<-done
		t.Fatal("requests waited on a lock of the user's or the token's row")
	}
}

// TestOwnerOfPackagesCannotBeDeleted: packages.owner_user_id has no foreign key (its
// check locked the owner's row in every creation); a trigger still refuses to delete a
// user who owns packages.
func TestOwnerOfPackagesCannotBeDeleted(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	owner, token := a.user("owner@example.com", app.RoleRegular)
	a.createPackage(token, map[string]any{"title": "t", "recipient_email": "r@example.com"})
	idle, _ := a.user("idle@example.com", app.RoleRegular)
	ctx := context.Background()

	_, err := a.pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, owner.ID)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23503" {
		t.Errorf("deleting an owner of packages: %v, want foreign_key_violation (23503)", err)
	}
	if _, err := a.pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, idle.ID); err != nil {
		t.Errorf("deleting a user without packages: %v", err)
	}
}
