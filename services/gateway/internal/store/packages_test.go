package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
)

// TestCreatePackageIsAtomic: CreatePackage sends the package, its audit entry and its
// outbox rows as one batch without an explicit transaction; when a later statement of
// the batch fails, the package must not be there either.
func TestCreatePackageIsAtomic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	owner := insertUser(t, pool, "o@example.com", "O")
	db := store.NewPostgres(pool)
	now := time.Now()
	pkg := func() app.Package { return draftPackage(owner, now) }
	count := func(table string) int {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	good := pkg()
	if err := db.CreatePackage(ctx, good, app.Effects{Audit: []app.AuditEntry{{Actor: "user", ActorUserID: &owner, Action: "package.create", PackageID: &good.ID}}}); err != nil {
		t.Fatal(err)
	}
	if count("packages") != 1 || count("audit_log") != 1 {
		t.Fatalf("after a good create: %d packages, %d audit entries", count("packages"), count("audit_log"))
	}

	// The audit entry violates its CHECK constraint: the whole batch must roll back.
	bad := pkg()
	if err := db.CreatePackage(ctx, bad, app.Effects{Audit: []app.AuditEntry{{Actor: "nobody", Action: "package.create", PackageID: &bad.ID}}}); err == nil {
		t.Fatal("a create whose audit entry is invalid succeeded")
	}
	if count("packages") != 1 || count("audit_log") != 1 {
		t.Fatalf("a failed create left %d packages, %d audit entries; want 1, 1", count("packages"), count("audit_log"))
	}
}
