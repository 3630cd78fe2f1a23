package store_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/services/expiry/internal/expirytest"
	"github.com/shipfile/shipfile/services/expiry/internal/store"
)

// TestSweepOrphans: only reservations older than the grace are taken; one whose file
// row exists is forgotten without removing its object; while the objects of the others
// are removed their reservations stay locked, so a gateway's commit of such a key (its
// DELETE of the reservation) waits; the keys removed are forgotten, a failed one stays.
func TestSweepOrphans(t *testing.T) {
	pool, _ := schematest.Pool(t)
	st := store.New(pool)
	owner := expirytest.User(t, pool)
	committed := expirytest.Insert(t, pool, owner, expirytest.Spec{ExpiresIn: time.Hour, Files: 1})[0].Keys[0]
	reserve := func(key string, age time.Duration) {
		if _, err := pool.Exec(ctx, `INSERT INTO object_reservations (object_key, reserved_at) VALUES ($1, now() - make_interval(secs => $2))`, key, age.Seconds()); err != nil {
			t.Fatal(err)
		}
	}
	reserve(committed, 3*time.Hour)
	reserve("packages/p/crashed", 2*time.Hour)
	reserve("packages/p/failed", 90*time.Minute)
	reserve("packages/p/in-progress", time.Minute)

	locked, removed, err := st.SweepOrphans(ctx, time.Hour, 10, func(keys []string) ([]string, error) {
		if want := []string{"packages/p/crashed", "packages/p/failed"}; !slices.Equal(keys, want) {
			t.Errorf("remove got %v, want %v (oldest first, no committed or young key)", keys, want)
		}
		// A gateway committing the key now must wait for the sweep.
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '100ms'`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DELETE FROM object_reservations WHERE object_key = 'packages/p/crashed'`)
			return err
		})
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != "55P03" {
			t.Errorf("a commit of a key being removed: %v, want a lock timeout (55P03)", err)
		}
		return keys[:1], errors.New("storage down") // crashed removed, failed not
	})
	if locked != 3 || removed != 1 || err == nil {
		t.Fatalf("sweep: locked %d removed %d err %v; want 3, 1 and the storage error", locked, removed, err)
	}
	rows, _ := pool.Query(ctx, `SELECT object_key FROM object_reservations ORDER BY object_key`)
	left, _ := pgx.CollectRows(rows, pgx.RowTo[string])
	if want := []string{"packages/p/failed", "packages/p/in-progress"}; !slices.Equal(left, want) {
		t.Fatalf("reservations left %v, want %v", left, want)
	}
}
