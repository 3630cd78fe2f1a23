package identitydb_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/store/identitydb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/storetest"
)

// TestOIDCIdentities: a user is found by (issuer, subject), both: the same subject at
// another issuer is another identity; an identity belongs to one user; a user is
// linked to one identity; a sign-in under way is taken once.
func TestOIDCIdentities(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	db := identitydb.NewStore(sqldb.NewDB(pool))
	const issA, issB = "https://a.example.com", "https://b.example.com"

	a, err := db.CreateOIDCUser(ctx, app.NewUser{Email: "a@example.com", Name: "A", Role: app.RoleRegular}, issA, "x")
	if err != nil || a.OIDCIssuer != issA || a.OIDCSubject != "x" || a.PasswordHash != "" {
		t.Fatalf("create: %+v %v", a, err)
	}
	if got, err := db.GetUserByOIDC(ctx, issA, "x"); err != nil || got.ID != a.ID {
		t.Fatalf("by (issA, x): %+v %v", got, err)
	}
	if _, err := db.GetUserByOIDC(ctx, issB, "x"); !errors.Is(err, app.ErrNotFound) {
		t.Fatalf("by (issB, x): %v, want not found", err)
	}
	b, err := db.CreateOIDCUser(ctx, app.NewUser{Email: "b@example.com", Name: "B", Role: app.RoleRegular}, issB, "x")
	if err != nil || b.ID == a.ID {
		t.Fatalf("the same subject at another issuer: %+v %v", b, err)
	}
	if got, err := db.GetUserByOIDC(ctx, issB, "x"); err != nil || got.ID != b.ID {
		t.Fatalf("by (issB, x): %+v %v", got, err)
	}
	if _, err := db.CreateOIDCUser(ctx, app.NewUser{Email: "c@example.com", Name: "C", Role: app.RoleRegular}, issA, "x"); !errors.Is(err, app.ErrConflict) {
		t.Fatalf("a second user of (issA, x): %v, want conflict", err)
	}

	made := storetest.InsertUser(t, pool, "made@example.com", "Made")
	if _, err := db.LinkUserOIDC(ctx, made, issA, "x", identity.AccountChange{}); !errors.Is(err, app.ErrConflict) {
		t.Fatalf("linking an identity another user has: %v, want conflict", err)
	}
	if u, err := db.LinkUserOIDC(ctx, made, issA, "y", identity.AccountChange{}); err != nil || u.OIDCSubject != "y" || u.OIDCIssuer != issA {
		t.Fatalf("link: %+v %v", u, err)
	}
	if _, err := db.LinkUserOIDC(ctx, made, issA, "z", identity.AccountChange{}); !errors.Is(err, app.ErrConflict) {
		t.Fatalf("linking a linked user again: %v, want conflict", err)
	}

	hash := []byte("0123456789abcdef0123456789abcdef")
	if err := db.InsertOIDCLogin(ctx, identity.OIDCLogin{StateHash: hash, Nonce: "n", Verifier: "v", Next: "/", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if l, err := db.TakeOIDCLogin(ctx, hash); err != nil || l.Nonce != "n" || l.Verifier != "v" {
		t.Fatalf("take: %+v %v", l, err)
	}
	if _, err := db.TakeOIDCLogin(ctx, hash); !errors.Is(err, app.ErrNotFound) {
		t.Fatalf("taken twice: %v, want not found", err)
	}
}
