package auditdb_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/services/gateway/internal/store/auditdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/packagerow"
	"github.com/shipfile/shipfile/services/gateway/internal/store/storetest"
)

// holdRace is the database of one race: an owner, the package whose on_hold is
// checked (created in the race or before it) and the owner's hold placed before it.
type holdRace struct {
	owner    int64
	pkg      uuid.UUID
	userHold uuid.UUID
}

// raceStep is one side of a race: the statements of one transaction, left open.
type raceStep func(ctx context.Context, tx pgx.Tx, r holdRace) error

func createPackage(ctx context.Context, tx pgx.Tx, r holdRace) error {
	p := storetest.DraftPackage(r.owner, time.Now())
	return packagerow.New(tx).InsertPackage(ctx, packagerow.InsertPackageParams{
		ID: r.pkg, OwnerUserID: p.OwnerUserID, Title: p.Title, RecipientEmail: p.RecipientEmail, Direction: string(p.Direction),
		State: string(p.State), TtlDays: int32(p.TTLDays), CreatedAt: p.CreatedAt, ExpiresAt: p.ExpiresAt, Encryption: "none",
	})
}

func placeUserHold(ctx context.Context, tx pgx.Tx, r holdRace) error {
	return insertHold(ctx, tx, auditdb.InsertLegalHoldParams{ID: uuid.New(), UserID: &r.owner, Reason: "race"})
}

func placePackageHold(ctx context.Context, tx pgx.Tx, r holdRace) error {
	return insertHold(ctx, tx, auditdb.InsertLegalHoldParams{ID: uuid.New(), PackageID: &r.pkg, Reason: "race"})
}

func insertHold(ctx context.Context, tx pgx.Tx, p auditdb.InsertLegalHoldParams) error {
	p.CreatedAt = time.Now()
	n, err := auditdb.New(tx).InsertLegalHold(ctx, p)
	if err == nil && n != 1 {
		err = errors.New("the hold was not inserted")
	}
	return err
}

func releaseUserHold(ctx context.Context, tx pgx.Tx, r holdRace) error {
	at := time.Now()
	_, err := auditdb.New(tx).ReleaseLegalHold(ctx, auditdb.ReleaseLegalHoldParams{ID: r.userHold, ReleasedAt: &at})
	return err
}

// TestHoldRaces: a hold placed or released on an owner while one of the owner's packages
// is being created, or while another hold on the owner's packages is written, both
// transactions open, leaves packages.on_hold saying whether an active hold covers the
// package, whichever commits first. The second transaction starts while the first is
// open; where it has to wait for the first (migration 00039), the first commits once it
// waits; where it does not, it commits first.
func TestHoldRaces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// userHold: the owner has an active hold before the race; pkg: the package
		// exists before the race.
		userHold, pkg bool
		first, second raceStep
		want          bool
	}{
		{name: "user hold placed while a package is created", first: createPackage, second: placeUserHold, want: true},
		{name: "package created while a user hold is placed", first: placeUserHold, second: createPackage, want: true},
		{name: "user hold released while a package is created", userHold: true, first: createPackage, second: releaseUserHold, want: false},
		{name: "package created while a user hold is released", userHold: true, first: releaseUserHold, second: createPackage, want: false},
		{name: "user hold released while a package hold is placed", userHold: true, pkg: true, first: placePackageHold, second: releaseUserHold, want: true},
		{name: "package hold placed while a user hold is released", userHold: true, pkg: true, first: releaseUserHold, second: placePackageHold, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pool := storetest.NewPool(t)
			r := holdRace{owner: storetest.InsertUser(t, pool, "o@example.com", "O"), pkg: uuid.New()}
			setup := func(step raceStep) {
				t.Helper()
				if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return step(ctx, tx, r) }); err != nil {
					t.Fatal(err)
				}
			}
			if tc.pkg {
				setup(createPackage)
			}
			if tc.userHold {
				r.userHold = uuid.New()
				setup(func(ctx context.Context, tx pgx.Tx, r holdRace) error {
					return insertHold(ctx, tx, auditdb.InsertLegalHoldParams{ID: r.userHold, UserID: &r.owner, Reason: "before"})
				})
			}

			first, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.first(ctx, first, r); err != nil {
				_ = first.Rollback(ctx)
				t.Fatal(err)
			}
			conn, err := pool.Acquire(ctx)
			if err != nil {
				_ = first.Rollback(ctx)
				t.Fatal(err)
			}
			defer conn.Release()
			pid := conn.Conn().PgConn().PID()
			done := make(chan error, 1)
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				done <- pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return tc.second(ctx, tx, r) })
			}()
			defer func() {
				_ = first.Rollback(context.Background()) // a no-op after the commit; else it frees the second
				<-ended
			}()
			secondFirst, secondErr := waitOrBlocked(t, ctx, pool, pid, done)
			if err := first.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if !secondFirst {
				secondErr = <-done
			}
			if secondErr != nil {
				t.Fatalf("second transaction: %v", secondErr)
			}
			order := "after"
			if secondFirst {
				order = "before"
			}

			var onHold, covered bool
			if err := pool.QueryRow(ctx, `SELECT on_hold, package_on_hold(id) FROM packages WHERE id = $1`, r.pkg).Scan(&onHold, &covered); err != nil {
				t.Fatal(err)
			}
			if covered != tc.want {
				t.Fatalf("an active hold covers the package: %v, want %v", covered, tc.want)
			}
			if onHold != tc.want {
				t.Fatalf("on_hold = %v with the second transaction committed %s the first, want %v", onHold, order, tc.want)
			}
		})
	}
}

// waitOrBlocked waits until the transaction on the backend pid either ended (done
// answered: true and its error) or waits for a lock (false).
func waitOrBlocked(t *testing.T, ctx context.Context, pool *pgxpool.Pool, pid uint32, done <-chan error) (bool, error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return true, err
		default:
		}
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)`, int32(pid)).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return false, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the second transaction neither ended nor waited for a lock")
	return false, nil
}
