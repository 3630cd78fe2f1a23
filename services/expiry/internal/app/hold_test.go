package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/expiry/internal/app"
	"github.com/shipfile/shipfile/services/expiry/internal/expirytest"
)

// TestHeldPackageSurvivesItsExpiry: a package under a legal hold stays past its expiry
// time, objects and all, while the others expire; once the hold is released the next
// tick expires it.
func TestHeldPackageSurvivesItsExpiry(t *testing.T) {
	f := newFixture(t, app.Options{BatchSize: 10, DeleteBatchSize: 10})
	ctx := context.Background()
	owner := expirytest.User(t, f.pool)
	ps := expirytest.Insert(t, f.pool, owner, expirytest.Spec{ExpiresIn: -time.Hour, Files: 1}, expirytest.Spec{ExpiresIn: -time.Hour, Files: 1})
	held, free := ps[0], ps[1]
	expirytest.Put(t, f.bucket, expirytest.Keys(ps))
	var hold string
	if err := f.pool.QueryRow(ctx, `INSERT INTO legal_holds (id, package_id, reason) VALUES (gen_random_uuid(), $1, 'case 7') RETURNING id`, held.ID).Scan(&hold); err != nil {
		t.Fatal(err)
	}
	if r := f.exp.Tick(ctx); r.Err != nil || r.Expired != 1 || r.Deleted != 1 {
		t.Fatalf("tick under the hold = %+v, want the other package expired and its object deleted", r)
	}
	states := expirytest.States(t, f.pool, ps)
	if states[held.ID] != "active" || states[free.ID] != "expired" {
		t.Fatalf("states %v: want the held package active, the other expired", states)
	}
	if left := expirytest.Objects(t, f.bucket); len(left) != 1 || left[0] != held.Keys[0] {
		t.Fatalf("objects left %v, want the held package's %v", left, held.Keys)
	}

	if _, err := f.pool.Exec(ctx, `UPDATE legal_holds SET released_at = now() WHERE id = $1`, hold); err != nil {
		t.Fatal(err)
	}
	if r := f.exp.Tick(ctx); r.Err != nil || r.Expired != 1 || r.Deleted != 1 {
		t.Fatalf("tick after the release = %+v, want the package expired and its object deleted", r)
	}
	if s := expirytest.States(t, f.pool, ps)[held.ID]; s != "expired" {
		t.Fatalf("the released package is %s", s)
	}
}
