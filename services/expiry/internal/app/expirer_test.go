package app_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/expiry/internal/app"
	"github.com/shipfile/shipfile/services/expiry/internal/expirytest"
	"github.com/shipfile/shipfile/services/expiry/internal/service"
)

// fixture is an expirer on a fresh database and a bucket of a private MinIO.
type fixture struct {
	pool    *pgxpool.Pool
	minio   *servicetest.MinIO
	bucket  *storage.Store
	metrics *app.Metrics
	exp     *app.Expirer
}

func newFixture(t *testing.T, opts app.Options) *fixture {
	t.Helper()
	pool, _ := schematest.Pool(t)
	m := servicetest.StartMinIO(t)
	b := expirytest.Bucket(t, m)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	svc := newService(t, pool, b, log, opts)
	return &fixture{pool: pool, minio: m, bucket: b, metrics: svc.Metrics, exp: svc.Expirer}
}

// newService builds the service's graph as the binary does (service.New), without the
// outbox relay, the expirer's options replaced by opts.
func newService(t *testing.T, pool *pgxpool.Pool, objects *storage.Store, log *slog.Logger, opts app.Options) *service.Service {
	t.Helper()
	svc, err := service.New(context.Background(), service.Config{}, service.Deps{
		Pool: pool, Objects: objects, Log: log, App: func(o *app.Options) { *o = opts },
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestTickExpiresEveryOverduePackageAndDeletesItsObjects(t *testing.T) {
	f := newFixture(t, app.Options{BatchSize: 3, DeleteBatchSize: 4})
	owner := expirytest.User(t, f.pool)
	var specs []expirytest.Spec
	for i := range 10 {
		specs = append(specs, expirytest.Spec{State: []string{"draft", "active", "revoked"}[i%3], ExpiresIn: -time.Duration(i+1) * time.Minute, Files: 1 + i%2})
	}
	overdue := expirytest.Insert(t, f.pool, owner, specs...)
	live := expirytest.Insert(t, f.pool, owner, expirytest.Spec{ExpiresIn: time.Hour, Files: 2})
	expirytest.Put(t, f.bucket, append(expirytest.Keys(overdue), expirytest.Keys(live)...))
	// A leftover of the gateway: a deleted file's object whose removal failed.
	expirytest.Put(t, f.bucket, []string{"packages/gone/leftover"})
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO object_deletions (object_key) VALUES ('packages/gone/leftover')`); err != nil {
		t.Fatal(err)
	}

	r := f.exp.Tick(context.Background())
	objects := len(expirytest.Keys(overdue)) + 1
	if r.Err != nil || r.Expired != 10 || r.Deleted != objects || r.DeletionFailures != 0 {
		t.Fatalf("tick = %+v, want 10 expired and %d objects deleted in batches of 3 and 4", r, objects)
	}
	states := expirytest.States(t, f.pool, append(overdue, live...))
	for _, p := range overdue {
		if states[p.ID] != "expired" {
			t.Errorf("%s is %s", p.ID, states[p.ID])
		}
	}
	if states[live[0].ID] != "active" {
		t.Errorf("the package that is not due is %s", states[live[0].ID])
	}
	left := expirytest.Objects(t, f.bucket)
	want := slices.Clone(live[0].Keys)
	slices.Sort(left)
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("objects left %v, want only the live package's %v", left, want)
	}
	if n := expirytest.Count(t, f.pool, `SELECT count(*) FROM object_deletions`); n != 0 {
		t.Errorf("%d keys still queued", n)
	}
	if n := expirytest.Count(t, f.pool, `SELECT count(*) FROM outbox WHERE subject = 'shipfile.events.package.expired'`); n != 10 {
		t.Errorf("%d package.expired outbox rows, want 10", n)
	}
	for name, got := range map[string]float64{
		"packages expired": testutil.ToFloat64(f.metrics.PackagesExpired),
		"objects deleted":  testutil.ToFloat64(f.metrics.ObjectsDeleted),
		"lag":              testutil.ToFloat64(f.metrics.Lag),
		"pending":          testutil.ToFloat64(f.metrics.PendingDeletions),
		"ok ticks":         testutil.ToFloat64(f.metrics.Ticks.WithLabelValues(app.OutcomeOK)),
	} {
		want := map[string]float64{"packages expired": 10, "objects deleted": float64(objects), "lag": 0, "pending": 0, "ok ticks": 1}[name]
		if got != want {
			t.Errorf("metric %s = %v, want %v", name, got, want)
		}
	}

	// A second tick finds nothing to do.
	if r := f.exp.Tick(context.Background()); r.Err != nil || r.Expired != 0 || r.Deleted != 0 {
		t.Errorf("second tick = %+v", r)
	}
}

// TestObjectsAreDeletedOnceMinIOIsBack: with MinIO stopped, a running expirer still
// expires the package (its objects queued, the failures counted, the tick an error);
// once MinIO is back, a later tick deletes the objects and empties the queue.
func TestObjectsAreDeletedOnceMinIOIsBack(t *testing.T) {
	f := newFixture(t, app.Options{Interval: 200 * time.Millisecond, StepTimeout: 10 * time.Second})
	owner := expirytest.User(t, f.pool)
	ps := expirytest.Insert(t, f.pool, owner, expirytest.Spec{ExpiresIn: time.Hour, Files: 3})
	expirytest.Put(t, f.bucket, ps[0].Keys)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.exp.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	f.minio.Stop()
	if _, err := f.pool.Exec(ctx, `UPDATE packages SET expires_at = now() - interval '1 minute' WHERE id = $1`, ps[0].ID); err != nil {
		t.Fatal(err)
	}
	servicetest.WaitFor(t, 30*time.Second, "the package expired and its deletions failing", func() bool {
		return expirytest.States(t, f.pool, ps)[ps[0].ID] == "expired" &&
			testutil.ToFloat64(f.metrics.DeletionFailures) >= 3 &&
			testutil.ToFloat64(f.metrics.Ticks.WithLabelValues(app.OutcomeError)) >= 1
	})
	if n := expirytest.Count(t, f.pool, `SELECT count(*) FROM object_deletions`); n != 3 {
		t.Fatalf("%d keys queued while MinIO is down, want 3", n)
	}
	if got := testutil.ToFloat64(f.metrics.ObjectsDeleted); got != 0 {
		t.Fatalf("%v objects deleted while MinIO is down", got)
	}

	f.minio.Start()
	servicetest.WaitFor(t, 60*time.Second, "the queue to empty once MinIO is back", func() bool {
		return expirytest.Count(t, f.pool, `SELECT count(*) FROM object_deletions`) == 0
	})
	if left := expirytest.Objects(t, f.bucket); len(left) != 0 {
		t.Fatalf("objects left after MinIO came back: %v", left)
	}
	servicetest.WaitFor(t, 10*time.Second, "the gauges of a tick after the queue emptied", func() bool {
		return testutil.ToFloat64(f.metrics.PendingDeletions) == 0
	})
	if got := testutil.ToFloat64(f.metrics.ObjectsDeleted); got != 3 {
		t.Errorf("objects deleted = %v, want 3", got)
	}
	if got := testutil.ToFloat64(f.metrics.PackagesExpired); got != 1 {
		t.Errorf("packages expired = %v, want 1 (never twice)", got)
	}
	if n := expirytest.Count(t, f.pool, `SELECT count(*) FROM outbox WHERE subject = 'shipfile.events.package.expired'`); n != 1 {
		t.Errorf("%d package.expired outbox rows, want 1", n)
	}
}

func TestTickAbortsStaleUploads(t *testing.T) {
	f := newFixture(t, app.Options{StaleUploadAge: time.Hour})
	core := minio.Core{Client: f.bucket.Client}
	if _, err := core.NewMultipartUpload(context.Background(), f.bucket.Bucket, "packages/p/f", minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := f.exp.Tick(context.Background()); r.Err != nil || r.UploadsAborted != 0 {
		t.Fatalf("tick with a young upload = %+v", r)
	}
	old := newService(t, f.pool, f.bucket, nil, app.Options{StaleUploadAge: time.Nanosecond})
	servicetest.WaitFor(t, 10*time.Second, "the stale upload to be aborted", func() bool {
		r := old.Expirer.Tick(context.Background())
		return r.Err == nil && r.UploadsAborted == 1
	})
	for u := range f.bucket.Client.ListIncompleteUploads(context.Background(), f.bucket.Bucket, "", true) {
		t.Errorf("upload left: %+v", u)
	}
	if got := testutil.ToFloat64(old.Metrics.StaleUploadsAborted); got != 1 {
		t.Errorf("stale uploads aborted = %v, want 1", got)
	}
}
