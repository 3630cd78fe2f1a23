package app_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/expiry/internal/app"
	"github.com/shipfile/shipfile/services/expiry/internal/expirytest"
)

// TestTickRemovesOrphanObjects simulates a gateway that stored an object and then
// crashed (or whose insert of the file row failed) before the row committed: the
// reserved key has an object and no file row. The object stays while the reservation is
// younger than the grace and is gone within a tick after it; a committed file's object
// and an upload still in progress are left alone.
func TestTickRemovesOrphanObjects(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	bucket := servicetest.Bucket(t)
	const grace = time.Second
	svc := newService(t, pool, bucket, nil, app.Options{OrphanGrace: grace})
	exp, metrics := svc.Expirer, svc.Metrics

	owner := expirytest.User(t, pool)
	committed := expirytest.Insert(t, pool, owner, expirytest.Spec{ExpiresIn: time.Hour, Files: 1})[0].Keys[0]
	crashed, inProgress := "packages/p/crashed-before-commit", "packages/p/still-uploading"
	reserve := func(p *pgxpool.Pool, key string, at string) {
		if _, err := p.Exec(context.Background(), `INSERT INTO object_reservations (object_key, reserved_at) VALUES ($1, `+at+`)`, key); err != nil {
			t.Fatal(err)
		}
	}
	reserved := time.Now()
	reserve(pool, crashed, "now()")
	reserve(pool, committed, "now()") // a reservation the commit did not remove: only forgotten
	reserve(pool, inProgress, "now() + interval '1 hour'")
	expirytest.Put(t, bucket, []string{crashed, committed, inProgress})

	r := exp.Tick(context.Background())
	if within := time.Since(reserved) < grace; within && (r.Err != nil || r.OrphansRemoved != 0 || !slices.Contains(expirytest.Objects(t, bucket), crashed)) {
		t.Fatalf("a tick within the grace = %+v, want nothing removed", r)
	}
	// The two reservations were made by separate statements, so they pass the grace a
	// few milliseconds apart and a tick may take one before the other: wait for both.
	servicetest.WaitFor(t, 10*time.Second, "the orphan object to be removed and the committed key's reservation forgotten", func() bool {
		r := exp.Tick(context.Background())
		return r.Err == nil && !slices.Contains(expirytest.Objects(t, bucket), crashed) &&
			expirytest.Count(t, pool, `SELECT count(*) FROM object_reservations WHERE object_key = $1`, committed) == 0
	})
	objs := expirytest.Objects(t, bucket)
	if !slices.Contains(objs, committed) || !slices.Contains(objs, inProgress) {
		t.Fatalf("objects left %v, want the committed file's and the upload in progress's", objs)
	}
	if n := expirytest.Count(t, pool, `SELECT count(*) FROM object_reservations WHERE object_key <> $1`, inProgress); n != 0 {
		t.Fatalf("%d reservations left besides the upload in progress", n)
	}
	if got := testutil.ToFloat64(metrics.OrphansRemoved); got != 1 {
		t.Fatalf("orphans removed = %v, want 1", got)
	}
}
