package policiesdb_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/policies"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
	"github.com/shipfile/shipfile/services/gateway/internal/store/policiesdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/storetest"
)

// TestUsageRunningTotal: the running usage follows the files added and removed, the
// packages created, expired and deleted, in the transactions that change them.
func TestUsageRunningTotal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	owner := storetest.InsertUser(t, pool, "o@example.com", "O")
	db := store.NewPostgres(pool)
	pol := policiesdb.NewStore(sqldb.NewDB(pool))
	now := time.Now()
	want := func(used int64, active int) {
		t.Helper()
		u, err := pol.Usage(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		if u.UsedBytes != used || u.ActivePackages != active || u.ReservedBytes != 0 {
			t.Fatalf("usage %+v, want used %d, active %d, reserved 0", u, used, active)
		}
	}
	want(0, 0)
	a, b := storetest.DraftPackage(owner, now), storetest.DraftPackage(owner, now)
	for _, p := range []app.Package{a, b} {
		if err := db.CreatePackage(ctx, p, app.Effects{}); err != nil {
			t.Fatal(err)
		}
	}
	want(0, 2)
	add := func(p app.Package, size int64) app.File {
		id := uuid.New()
		f := app.File{ID: id, PackageID: p.ID, Filename: "f", ContentType: "text/plain", SHA256: "00", Size: size,
			ObjectKey: "packages/" + p.ID.String() + "/" + id.String(), UploadedBy: app.ByOwner, CreatedAt: now}
		if err := db.ReserveObjectKey(ctx, f.ObjectKey); err != nil {
			t.Fatal(err)
		}
		if _, err := db.AddFile(ctx, f, func(p *app.Package) (app.Effects, error) {
			p.FileCount++
			p.TotalSize += size
			return app.Effects{}, nil
		}); err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := add(a, 100)
	add(a, 20)
	add(b, 5)
	want(125, 2)
	if err := db.RemoveFile(ctx, a.ID, f.ID, func(p *app.Package, f app.File) (app.Effects, error) {
		p.FileCount--
		p.TotalSize -= f.Size
		return app.Effects{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	want(25, 2)
	if _, err := pool.Exec(ctx, `UPDATE packages SET state = 'expired' WHERE id = $1`, b.ID); err != nil {
		t.Fatal(err)
	}
	want(20, 1)
	if _, err := db.DeletePackage(ctx, a.ID, func(*app.Package) (app.Effects, error) { return app.Effects{}, nil }); err != nil {
		t.Fatal(err)
	}
	want(0, 0)
}

// TestReserveNeverOversubscribes: parallel reservations of one user take at most what
// fits under the quota; deleting their holds (an upload's end) gives the bytes back.
func TestReserveNeverOversubscribes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	owner := storetest.InsertUser(t, pool, "o@example.com", "O")
	db := policiesdb.NewStore(sqldb.NewDB(pool))
	quota := int64(1000)
	const n = 12
	var (
		mu   sync.Mutex
		took []uuid.UUID
		wg   sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			r := policies.Reservation{ID: uuid.New(), UserID: owner, ExpiresAt: time.Now().Add(time.Minute)}
			_, _, ok, err := db.Reserve(ctx, r, 300, &quota, 0, false)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				mu.Lock()
				took = append(took, r.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(took) != 3 {
		t.Fatalf("%d of %d reservations of 300 under a quota of 1000 went through, want 3", len(took), n)
	}
	u, err := db.Usage(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if u.ReservedBytes != 900 {
		t.Fatalf("reserved %d, want 900", u.ReservedBytes)
	}
	if err := db.ReleaseHold(ctx, took[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE quota_holds SET expires_at = now() - interval '1s' WHERE id = $1`, took[1]); err != nil {
		t.Fatal(err)
	}
	if n, err := db.SweepHolds(ctx); err != nil || n != 1 {
		t.Fatalf("SweepHolds = %d, %v; want 1", n, err)
	}
	if u, _ = db.Usage(ctx, owner); u.ReservedBytes != 300 {
		t.Fatalf("reserved %d after a release and a sweep, want 300", u.ReservedBytes)
	}

	t.Run("the cap bounds every user", func(t *testing.T) {
		other := storetest.InsertUser(t, pool, "p@example.com", "P")
		r := policies.Reservation{ID: uuid.New(), UserID: other, ExpiresAt: time.Now().Add(time.Minute)}
		_, total, ok, err := db.Reserve(ctx, r, 800, nil, 1000, false)
		if err != nil || ok || total != 300 {
			t.Fatalf("Reserve past the cap: ok %v, total %d, %v; want refused with 300 held", ok, total, err)
		}
		if _, _, ok, err = db.Reserve(ctx, r, 700, nil, 1000, false); err != nil || !ok {
			t.Fatalf("Reserve up to the cap: ok %v, %v", ok, err)
		}
	})
}

// TestHoldGoesWithItsObjectKey: a multipart upload's hold lives as long as its object
// key's reservation: a gateway killed mid-upload leaves the reservation to the orphan
// sweep (which deletes it), and its bytes go back with it.
func TestHoldGoesWithItsObjectKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	owner := storetest.InsertUser(t, pool, "o@example.com", "O")
	db := store.NewPostgres(pool)
	pol := policiesdb.NewStore(sqldb.NewDB(pool))
	key := "packages/" + uuid.NewString() + "/" + uuid.NewString()
	if err := db.ReserveObjectKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	r := policies.Reservation{ID: uuid.New(), UserID: owner, Hold: policies.Hold{ObjectKey: key}}
	if _, _, ok, err := pol.Reserve(ctx, r, 400, nil, 0, false); err != nil || !ok {
		t.Fatalf("Reserve: %v %v", ok, err)
	}
	if _, _, ok, err := pol.Reserve(ctx, r, 100, nil, 0, true); err != nil || !ok {
		t.Fatalf("grow: %v %v", ok, err)
	}
	if u, _ := pol.Usage(ctx, owner); u.ReservedBytes != 500 {
		t.Fatalf("reserved %d, want 500", u.ReservedBytes)
	}
	// What the expiry service's orphan sweep does.
	if _, err := pool.Exec(ctx, `DELETE FROM object_reservations WHERE object_key = $1`, key); err != nil {
		t.Fatal(err)
	}
	if u, _ := pol.Usage(ctx, owner); u.ReservedBytes != 0 {
		t.Fatalf("reserved %d after the key's reservation went, want 0", u.ReservedBytes)
	}
	if _, _, _, err := pol.Reserve(ctx, r, 100, nil, 0, true); app.KindOf(err) != app.KindConflict {
		t.Fatalf("growing a hold that is gone: %v, want a conflict", err)
	}
}
