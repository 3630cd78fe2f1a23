package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/database"
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

// TestCreatePackageUsesGenericPlans: the creation's INSERTs run with generic plans (made
// once per connection, not planned on every execution), and the connection goes back
// to the pool with the pool's plan_cache_mode (force_custom_plan), also after a failed
// creation.
func TestCreatePackageUsesGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := newSmallPool(t, 1) // every statement below runs on the one connection
	owner := insertUser(t, pool, "o@example.com", "O")
	db := store.NewPostgres(pool)
	mode := func() string {
		var m string
		if err := pool.QueryRow(ctx, `SHOW plan_cache_mode`).Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for i := range 3 {
		p := draftPackage(owner, time.Now())
		if err := db.CreatePackage(ctx, p, app.Effects{Audit: []app.AuditEntry{{Actor: "user", ActorUserID: &owner, Action: "package.create", PackageID: &p.ID}}}); err != nil {
			t.Fatal(err)
		}
		if m := mode(); m != database.PlanCacheMode {
			t.Fatalf("after creation %d the connection has plan_cache_mode %q, want %q", i, m, database.PlanCacheMode)
		}
	}
	var generic, custom int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
		FROM pg_prepared_statements WHERE statement LIKE '%INSERT INTO packages%'`).Scan(&generic, &custom); err != nil {
		t.Fatal(err)
	}
	if generic < 3 || custom != 0 {
		t.Fatalf("INSERT INTO packages ran with %d generic and %d custom plans, want at least 3 and 0", generic, custom)
	}
	bad := draftPackage(owner, time.Now())
	if err := db.CreatePackage(ctx, bad, app.Effects{Audit: []app.AuditEntry{{Actor: "nobody", Action: "package.create", PackageID: &bad.ID}}}); err == nil {
		t.Fatal("a create whose audit entry is invalid succeeded")
	}
	if m := mode(); m != database.PlanCacheMode {
		t.Fatalf("after a failed creation the connection has plan_cache_mode %q, want %q", m, database.PlanCacheMode)
	}
}
