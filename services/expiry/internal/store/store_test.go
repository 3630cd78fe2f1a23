package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/services/expiry/internal/app"
	"github.com/shipfile/shipfile/services/expiry/internal/expirytest"
	"github.com/shipfile/shipfile/services/expiry/internal/store"
)

var ctx = context.Background()

// effects is the app's own effects builder, so the rows written are the real ones.
func effects(ps []app.Package) (app.Effects, error) {
	fx := app.Effects{}
	for _, p := range ps {
		fx.Events = append(fx.Events, app.PackageExpired(p, time.Now()))
		fx.Audit = append(fx.Audit, app.AuditEntry{Action: app.AuditActionExpired, PackageID: p.ID})
	}
	return fx, nil
}

func TestExpireDue(t *testing.T) {
	pool, _ := schematest.Pool(t)
	st := store.New(pool)
	owner := expirytest.User(t, pool)
	ps := expirytest.Insert(t, pool, owner,
		expirytest.Spec{State: "draft", ExpiresIn: -time.Hour, Files: 2},
		expirytest.Spec{State: "active", ExpiresIn: -time.Minute, Files: 1, Direction: "inbound"},
		expirytest.Spec{State: "revoked", ExpiresIn: -time.Second},
		expirytest.Spec{State: "active", ExpiresIn: time.Hour, Files: 1},   // not due
		expirytest.Spec{State: "expired", ExpiresIn: -time.Hour, Files: 1}, // done already
	)
	// The oldest package edited since: its row moves to the end of the table, so the
	// UPDATE's RETURNING would hand it back last.
	if _, err := pool.Exec(ctx, `UPDATE packages SET title = title || ' (edited)' WHERE id = $1`, ps[0].ID); err != nil {
		t.Fatal(err)
	}
	ps[0].Title += " (edited)"

	got, err := st.ExpireDue(ctx, time.Now(), 10, effects)
	if err != nil {
		t.Fatal(err)
	}
	// Oldest deadline first.
	if len(got) != 3 || got[0].ID != ps[0].ID || got[1].ID != ps[1].ID || got[2].ID != ps[2].ID {
		t.Fatalf("expired %+v, want the three overdue packages oldest first", got)
	}
	for i, want := range []string{"draft", "active", "revoked"} {
		if got[i].PreviousState != want || !slices.Equal(got[i].ObjectKeys, ps[i].Keys) {
			t.Errorf("package %d: previous state %q keys %v, want %q %v", i, got[i].PreviousState, got[i].ObjectKeys, want, ps[i].Keys)
		}
	}
	if got[1].Direction != "inbound" || got[1].OwnerUserID != owner || got[1].RecipientEmail != "bob@example.com" || got[1].Title != ps[1].Title {
		t.Errorf("package fields: %+v", got[1])
	}

	states := expirytest.States(t, pool, ps)
	for i, want := range []string{"expired", "expired", "expired", "active", "expired"} {
		if states[ps[i].ID] != want {
			t.Errorf("package %d is %s, want %s", i, states[ps[i].ID], want)
		}
	}

	// The three packages' objects are queued; the others' are not. File rows stay.
	var queued []string
	rows, _ := pool.Query(ctx, `SELECT object_key FROM object_deletions ORDER BY object_key`)
	queued, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := expirytest.Keys(ps[:3])
	slices.Sort(want)
	if !slices.Equal(queued, want) {
		t.Errorf("queued %v, want %v", queued, want)
	}
	if n := expirytest.Count(t, pool, `SELECT count(*) FROM files`); n != 5 {
		t.Errorf("%d file rows, want all 5 kept", n)
	}

	// One package.expired outbox row and one system audit entry per package.
	checkOutbox(t, pool, got)
	if n := expirytest.Count(t, pool, `SELECT count(*) FROM audit_log WHERE actor = 'system' AND action = 'package.expired'
		AND actor_user_id IS NULL AND package_id = ANY($1::uuid[])`, []string{ps[0].ID, ps[1].ID, ps[2].ID}); n != 3 {
		t.Errorf("%d audit entries, want 3", n)
	}

	// Nothing is due any more: a second pass changes nothing.
	again, err := st.ExpireDue(ctx, time.Now(), 10, effects)
	if err != nil || len(again) != 0 {
		t.Fatalf("second pass: %v %v", again, err)
	}
	if n := expirytest.Count(t, pool, `SELECT count(*) FROM outbox`); n != 3 {
		t.Errorf("%d outbox rows after a second pass, want 3", n)
	}
}

// checkOutbox decodes the outbox rows and compares them with the expired packages.
func checkOutbox(t *testing.T, pool *pgxpool.Pool, ps []app.Package) {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT msg_id, subject, payload FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		msgID, subject string
		payload        []byte
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.msgID, &x.subject, &x.payload)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ps) {
		t.Fatalf("%d outbox rows, want %d", len(got), len(ps))
	}
	for i, r := range got {
		env, err := events.UnmarshalEnvelope(r.payload)
		if err != nil {
			t.Fatal(err)
		}
		d := env.GetPackageExpired()
		p := ps[i]
		if r.subject != "shipfile.events.package.expired" || r.msgID != env.GetEventId() || env.GetType() != events.TypePackageExpired ||
			env.GetVersion() != events.Version || d == nil || d.GetPackage().GetPackageId() != p.ID ||
			d.GetPackage().GetTitle() != p.Title || d.GetPackage().GetRecipientEmail() != p.RecipientEmail ||
			d.GetPackage().GetOwnerUserId() != p.OwnerUserID || d.GetPackage().GetDirection() != p.Direction ||
			!d.GetExpiresAt().AsTime().Equal(p.ExpiresAt) || time.Since(env.GetOccurredAt().AsTime()) > time.Minute {
			t.Errorf("outbox row %d: %s %s %v, want the package.expired of %+v", i, r.subject, r.msgID, env, p)
		}
	}
}

func TestExpireDueTakesTheOldestBatchAndSkipsLockedRows(t *testing.T) {
	pool, _ := schematest.Pool(t)
	st := store.New(pool)
	owner := expirytest.User(t, pool)
	ps := expirytest.Insert(t, pool, owner,
		expirytest.Spec{ExpiresIn: -3 * time.Hour},
		expirytest.Spec{ExpiresIn: -2 * time.Hour},
		expirytest.Spec{ExpiresIn: -1 * time.Hour},
		expirytest.Spec{ExpiresIn: -1 * time.Minute},
	)

	// Another transaction (a gateway request, another instance) holds the oldest one.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SELECT 1 FROM packages WHERE id = $1 FOR UPDATE`, ps[0].ID); err != nil {
		t.Fatal(err)
	}

	got, err := st.ExpireDue(ctx, time.Now(), 2, effects)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != ps[1].ID || got[1].ID != ps[2].ID {
		t.Fatalf("first batch %v, want packages 1 and 2 (0 is locked)", ids(got))
	}
	got, err = st.ExpireDue(ctx, time.Now(), 2, effects)
	if err != nil || len(got) != 1 || got[0].ID != ps[3].ID {
		t.Fatalf("second batch %v %v, want package 3 alone", ids(got), err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = st.ExpireDue(ctx, time.Now(), 2, effects)
	if err != nil || len(got) != 1 || got[0].ID != ps[0].ID {
		t.Fatalf("after the lock is gone: %v %v, want package 0", ids(got), err)
	}
}

func TestExpireDueRollsBackWhenTheEffectsFail(t *testing.T) {
	pool, _ := schematest.Pool(t)
	st := store.New(pool)
	ps := expirytest.Insert(t, pool, expirytest.User(t, pool), expirytest.Spec{ExpiresIn: -time.Minute, Files: 1})
	boom := errors.New("boom")
	if _, err := st.ExpireDue(ctx, time.Now(), 10, func([]app.Package) (app.Effects, error) { return app.Effects{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if s := expirytest.States(t, pool, ps)[ps[0].ID]; s != "active" {
		t.Errorf("state %s after a rollback", s)
	}
	for _, table := range []string{"object_deletions", "outbox", "audit_log"} {
		if n := expirytest.Count(t, pool, "SELECT count(*) FROM "+table); n != 0 {
			t.Errorf("%d rows in %s after a rollback", n, table)
		}
	}
}

func TestSweepDeletions(t *testing.T) {
	pool, _ := schematest.Pool(t)
	st := store.New(pool)
	keys := []string{"packages/a/1", "packages/a/2", "packages/b/1", "packages/b/2"}
	for i, k := range keys {
		// Distinct times: the sweep takes the oldest first.
		if _, err := pool.Exec(ctx, `INSERT INTO object_deletions (object_key, created_at) VALUES ($1, now() - $2 * interval '1 second')`, k, 10-i); err != nil {
			t.Fatal(err)
		}
	}

	// While one sweep holds the two oldest keys, a second sweep gets the two others.
	var inner []string
	locked, forgotten, err := st.SweepDeletions(ctx, 2, func(got []string) ([]string, error) {
		if !slices.Equal(got, keys[:2]) {
			t.Errorf("first sweep got %v, want %v", got, keys[:2])
		}
		l, f, err := st.SweepDeletions(ctx, 10, func(got []string) ([]string, error) {
			inner = got
			return got[:1], errors.New("storage down") // one removed, one failed
		})
		if l != 2 || f != 1 || err == nil {
			t.Errorf("inner sweep: locked %d forgot %d err %v, want 2, 1 and the storage error", l, f, err)
		}
		return got, nil
	})
	if err != nil || locked != 2 || forgotten != 2 {
		t.Fatalf("outer sweep: locked %d forgot %d err %v", locked, forgotten, err)
	}
	if !slices.Equal(inner, keys[2:]) {
		t.Errorf("inner sweep got %v, want %v", inner, keys[2:])
	}
	var left []string
	rows, _ := pool.Query(ctx, `SELECT object_key FROM object_deletions`)
	left, _ = pgx.CollectRows(rows, pgx.RowTo[string])
	if !slices.Equal(left, keys[3:]) {
		t.Errorf("left queued %v, want the failed key %v", left, keys[3:])
	}
	n, err := st.PendingDeletions(ctx)
	if err != nil || n != 1 {
		t.Errorf("PendingDeletions = %d, %v; want 1", n, err)
	}
}

func TestOverdueLag(t *testing.T) {
	pool, _ := schematest.Pool(t)
	st := store.New(pool)
	owner := expirytest.User(t, pool)
	expirytest.Insert(t, pool, owner, expirytest.Spec{ExpiresIn: time.Hour}, expirytest.Spec{State: "expired", ExpiresIn: -time.Hour})
	if lag, err := st.OverdueLag(ctx, time.Now()); err != nil || lag != 0 {
		t.Fatalf("lag with nothing overdue = %s, %v; want 0", lag, err)
	}
	expirytest.Insert(t, pool, owner, expirytest.Spec{ExpiresIn: -90 * time.Second}, expirytest.Spec{ExpiresIn: -time.Second})
	lag, err := st.OverdueLag(ctx, time.Now())
	if err != nil || lag < 90*time.Second || lag > 100*time.Second {
		t.Fatalf("lag = %s, %v; want about 90s (the oldest overdue package)", lag, err)
	}
}

func ids(ps []app.Package) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// TestExpireDueUsesTheCallersClock: "overdue" is decided at the instant the service
// passes (lifecycle.OverdueSQL), not by the database's now(), as the gateway's state
// table decides with the gateway's clock.
func TestExpireDueUsesTheCallersClock(t *testing.T) {
	pool, _ := schematest.Pool(t)
	st := store.New(pool)
	owner := expirytest.User(t, pool)
	ps := expirytest.Insert(t, pool, owner, expirytest.Spec{State: "active", ExpiresIn: time.Hour})
	if got, err := st.ExpireDue(ctx, time.Now(), 10, effects); err != nil || len(got) != 0 {
		t.Fatalf("expired %v, %v before the deadline", got, err)
	}
	later := time.Now().Add(2 * time.Hour)
	if lag, err := st.OverdueLag(ctx, later); err != nil || lag < 59*time.Minute || lag > 61*time.Minute {
		t.Errorf("lag two hours on = %s, %v; want about 1h", lag, err)
	}
	got, err := st.ExpireDue(ctx, later, 10, effects)
	if err != nil || len(got) != 1 || got[0].ID != ps[0].ID {
		t.Fatalf("expired %v, %v at a clock past the deadline; want the package", got, err)
	}
}

// TestExpireDueWakesTheRelayAfterCommit: the store wakes the outbox relay once per
// batch that wrote events, after the commit (its rows are visible to another
// connection by then), and not for a pass that expired nothing or was rolled back.
func TestExpireDueWakesTheRelayAfterCommit(t *testing.T) {
	pool, _ := schematest.Pool(t)
	var wakes, visible []int
	st := store.New(pool, store.WithOutboxWake(func() {
		wakes = append(wakes, 1)
		visible = append(visible, expirytest.Count(t, pool, `SELECT count(*) FROM outbox WHERE published_at IS NULL`))
	}))
	expirytest.Insert(t, pool, expirytest.User(t, pool),
		expirytest.Spec{ExpiresIn: -time.Minute}, expirytest.Spec{ExpiresIn: -time.Hour})
	if _, err := st.ExpireDue(ctx, time.Now(), 10, effects); err != nil {
		t.Fatal(err)
	}
	if len(wakes) != 1 || visible[0] != 2 {
		t.Fatalf("woken %d times, seeing %v committed rows; want once, after both rows committed", len(wakes), visible)
	}
	if _, err := st.ExpireDue(ctx, time.Now(), 10, effects); err != nil {
		t.Fatal(err)
	}
	expirytest.Insert(t, pool, expirytest.User(t, pool), expirytest.Spec{ExpiresIn: -time.Minute})
	if _, err := st.ExpireDue(ctx, time.Now(), 10, func([]app.Package) (app.Effects, error) { return app.Effects{}, errors.New("boom") }); err == nil {
		t.Fatal("the effects' error was not returned")
	}
	if len(wakes) != 1 {
		t.Errorf("woken %d times, want no wake for an empty pass or a rollback", len(wakes))
	}
}
