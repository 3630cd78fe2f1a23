package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
)

// TestConcurrentCreatesShareACommit: package creations that arrive while the store's
// rounds are all in flight queue, and go in one round trip and one commit when a round
// ends; a member whose statements fail fails alone, and a member whose client went away
// while it queued is not written.
func TestConcurrentCreatesShareACommit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// One round in flight at a time (half the pool), one connection for the test's queries.
	pool, url := newSmallPool(t, 2)
	owner := insertUser(t, pool, "o@example.com", "O")
	reg := prometheus.NewRegistry()
	db := store.NewPostgres(pool, store.WithRegisterer(reg))

	// holdInserts takes a lock that makes every INSERT INTO packages wait, until release.
	holdInserts := func() (release func()) {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE packages IN SHARE MODE`); err != nil {
			t.Fatal(err)
		}
		return func() { _ = tx.Commit(ctx); _ = conn.Close(ctx) }
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		servicetest.WaitFor(t, 20*time.Second, what, ok)
	}
	blocked := func() bool {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	audit := func(p app.Package, actor string) app.Effects {
		a := app.AuditEntry{Actor: actor, Action: "package.create", PackageID: &p.ID}
		if actor == "user" {
			a.ActorUserID = &owner
		}
		return app.Effects{Audit: []app.AuditEntry{a}}
	}
	exists := func(p app.Package) bool {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM packages WHERE id = $1`, p.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	type outcome struct {
		p   app.Package
		err error
	}
	// create starts a creation and returns where its outcome will be.
	var wg sync.WaitGroup
	create := func(ctx context.Context, actor string) *outcome {
		o := &outcome{p: draftPackage(owner, time.Now())}
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.err = db.CreatePackage(ctx, o.p, audit(o.p, actor))
		}()
		return o
	}

	// Six creations while the first is in flight: the five behind it share one round.
	release := holdInserts()
	first := create(ctx, "user")
	waitFor("the first creation to wait on the lock", blocked)
	var queued []*outcome
	for range 5 {
		queued = append(queued, create(ctx, "user"))
	}
	waitFor("five queued creations", func() bool { return db.QueuedCreates() == 5 })
	before := db.CreateRounds()
	release()
	wg.Wait()
	for i, o := range append([]*outcome{first}, queued...) {
		if o.err != nil || !exists(o.p) {
			t.Fatalf("creation %d: err %v, stored %v", i, o.err, exists(o.p))
		}
	}
	if n := db.CreateRounds() - before; n != 1 {
		t.Fatalf("the five queued creations took %d round trips, want 1", n)
	}
	// The metrics an operator reads: two rounds (the first creation alone, then the
	// five), six creations.
	const want = `
# HELP shipfile_package_create_round_creations_total Package creations sent in those round trips (per round: this over shipfile_package_create_rounds_total).
# TYPE shipfile_package_create_round_creations_total counter
shipfile_package_create_round_creations_total 6
# HELP shipfile_package_create_rounds_total Round trips (each one transaction and one commit) that carried package creations.
# TYPE shipfile_package_create_rounds_total counter
shipfile_package_create_rounds_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}

	// A failing member, and one whose client went away while it queued.
	release = holdInserts()
	lead := create(ctx, "user")
	waitFor("the leading creation to wait on the lock", blocked)
	good := create(ctx, "user")
	bad := create(ctx, "nobody") // its audit entry breaks a CHECK constraint
	goneCtx, gone := context.WithCancel(ctx)
	left := create(goneCtx, "user")
	waitFor("three queued creations", func() bool { return db.QueuedCreates() == 3 })
	gone()
	waitFor("the creation whose client went away to leave the queue", func() bool { return db.QueuedCreates() == 2 })
	release()
	wg.Wait()
	if lead.err != nil || good.err != nil || !exists(lead.p) || !exists(good.p) {
		t.Fatalf("the good creations: %v / %v, stored %v / %v", lead.err, good.err, exists(lead.p), exists(good.p))
	}
	if bad.err == nil || exists(bad.p) {
		t.Fatalf("the failing creation: err %v, stored %v; want an error and nothing stored", bad.err, exists(bad.p))
	}
	if !errors.Is(left.err, context.Canceled) || exists(left.p) {
		t.Fatalf("the creation whose client went away: err %v, stored %v; want context.Canceled and nothing stored", left.err, exists(left.p))
	}
	var audits, stored int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_log), (SELECT count(*) FROM packages)`).Scan(&audits, &stored); err != nil {
		t.Fatal(err)
	}
	if audits != 8 || stored != 8 {
		t.Fatalf("%d audit entries and %d packages, want 8 of each (six, then two)", audits, stored)
	}
}
