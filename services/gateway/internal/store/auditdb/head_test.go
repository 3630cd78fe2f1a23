package auditdb_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/services/gateway/internal/store/storetest"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// chainTx is one transaction's pattern of chained writes: it returns how many of its
// entries stay when it commits.
type chainTx func(ctx context.Context, tx pgx.Tx, tag string) (int, error)

func insertEntries(ctx context.Context, tx pgx.Tx, tag string, n int) error {
	_, err := tx.Exec(ctx, `INSERT INTO audit_log (actor, action, detail)
		SELECT 'system', 'test.write', $1 || '/' || g FROM generate_series(1, $2::int) g`, tag, n)
	return err
}

// chainPatterns: savepoints rolled back before, between and after entries, released
// ones, a PL/pgSQL exception block, the head written in the middle of a transaction
// (SET CONSTRAINTS … IMMEDIATE) and entries after it.
var chainPatterns = map[string]chainTx{
	"first entry rolled back to a savepoint": func(ctx context.Context, tx pgx.Tx, tag string) (int, error) {
		if _, err := tx.Exec(ctx, `SAVEPOINT s`); err != nil {
			return 0, err
		}
		if err := insertEntries(ctx, tx, tag+"/gone", 2); err != nil {
			return 0, err
		}
		if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT s`); err != nil {
			return 0, err
		}
		return 3, insertEntries(ctx, tx, tag, 3)
	},
	"middle rolled back, then released": func(ctx context.Context, tx pgx.Tx, tag string) (int, error) {
		if err := insertEntries(ctx, tx, tag+"/a", 2); err != nil {
			return 0, err
		}
		for _, sql := range []string{`SAVEPOINT s`, `INSERT INTO audit_log (actor, action) VALUES ('system', 'test.gone')`, `ROLLBACK TO SAVEPOINT s`,
			`SAVEPOINT t`, `INSERT INTO audit_log (actor, action) VALUES ('system', 'test.kept')`, `RELEASE SAVEPOINT t`} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return 0, err
			}
		}
		return 4, insertEntries(ctx, tx, tag+"/b", 1)
	},
	"last rolled back": func(ctx context.Context, tx pgx.Tx, tag string) (int, error) {
		if err := insertEntries(ctx, tx, tag, 2); err != nil {
			return 0, err
		}
		for _, sql := range []string{`SAVEPOINT s`, `INSERT INTO audit_log (actor, action) VALUES ('system', 'test.gone')`, `ROLLBACK TO SAVEPOINT s`} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return 0, err
			}
		}
		return 2, nil
	},
	"exception block": func(ctx context.Context, tx pgx.Tx, tag string) (int, error) {
		_, err := tx.Exec(ctx, `DO $$ BEGIN
			INSERT INTO audit_log (actor, action) VALUES ('system', 'test.kept');
			BEGIN
				INSERT INTO audit_log (actor, action) VALUES ('system', 'test.gone');
				RAISE EXCEPTION 'undo';
			EXCEPTION WHEN raise_exception THEN NULL;
			END;
			INSERT INTO audit_log (actor, action) VALUES ('system', 'test.kept');
		END $$`)
		return 2, err
	},
	"head written in the middle": func(ctx context.Context, tx pgx.Tx, tag string) (int, error) {
		if err := insertEntries(ctx, tx, tag+"/a", 2); err != nil {
			return 0, err
		}
		if _, err := tx.Exec(ctx, `SET CONSTRAINTS ALL IMMEDIATE`); err != nil {
			return 0, err
		}
		if err := insertEntries(ctx, tx, tag+"/b", 1); err != nil {
			return 0, err
		}
		for _, sql := range []string{`SET CONSTRAINTS ALL DEFERRED`, `SAVEPOINT s`, `INSERT INTO audit_log (actor, action) VALUES ('system', 'test.gone')`,
			`SET CONSTRAINTS ALL IMMEDIATE`, `ROLLBACK TO SAVEPOINT s`} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return 0, err
			}
		}
		return 4, insertEntries(ctx, tx, tag+"/c", 1)
	},
	"one entry": func(ctx context.Context, tx pgx.Tx, tag string) (int, error) {
		return 1, insertEntries(ctx, tx, tag, 1)
	},
}

// writeChainPatterns runs every pattern rounds times from each of writers goroutines at
// once (every fourth transaction rolled back whole) and returns the entries committed.
func writeChainPatterns(t *testing.T, pool *pgxpool.Pool, writers, rounds int) int64 {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var committed int64
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			n := 0
			for r := range rounds {
				for name, pattern := range chainPatterns {
					n++
					tx, err := pool.Begin(ctx)
					if err != nil {
						errs <- err
						return
					}
					kept, err := pattern(ctx, tx, fmt.Sprintf("%d/%d", w, r))
					if err != nil {
						_ = tx.Rollback(ctx)
						errs <- fmt.Errorf("%s: %w", name, err)
						return
					}
					if n%4 == 0 {
						if err := tx.Rollback(ctx); err != nil {
							errs <- err
							return
						}
						continue
					}
					if err := tx.Commit(ctx); err != nil {
						errs <- fmt.Errorf("%s: commit: %w", name, err)
						return
					}
					mu.Lock()
					committed += int64(kept)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return committed
}

// checkHead fails the test unless the chain holds want entries numbered 1…want and the
// head row names the last of them.
func checkHead(t *testing.T, pool *pgxpool.Pool, want int64) {
	t.Helper()
	var rows, maxSeq, headSeq int64
	var same bool
	if err := pool.QueryRow(context.Background(), `SELECT count(a.seq), coalesce(max(a.seq), 0), h.seq,
			h.hash = coalesce((SELECT hash FROM audit_log WHERE seq = h.seq), repeat('0', 64))
		FROM audit_chain_head h LEFT JOIN audit_log a ON a.seq IS NOT NULL GROUP BY h.seq, h.hash`).Scan(&rows, &maxSeq, &headSeq, &same); err != nil {
		t.Fatal(err)
	}
	if rows != want || maxSeq != want || headSeq != want || !same {
		t.Fatalf("%d chained entries up to seq %d, head at %d (its hash the entry's: %v); want %d, gapless, the head on the last", rows, maxSeq, headSeq, same, want)
	}
}

// TestAuditChainSavepoints: the running head a transaction keeps goes back with every
// savepoint rolled back, exception block or whole transaction, whoever writes at the
// same time, so the chain stays gapless, unforked and verifiable, and the head row
// names its last entry.
func TestAuditChainSavepoints(t *testing.T) {
	t.Parallel()
	pool := storetest.NewPool(t)
	committed := writeChainPatterns(t, pool, 4, 5)
	checkHead(t, pool, committed)
	verifyChain(t, pool, committed)
}

// TestAuditChainAcrossMigration: a chain written by 00033's trigger (the head moved at
// every entry) goes on under 00038's (the head moved once per transaction) as one
// chain that verifies.
func TestAuditChainAcrossMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	if err := migrations.UpTo(ctx, url, 37); err != nil {
		t.Fatal(err)
	}
	pool, err := database.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	before := writeChainPatterns(t, pool, 2, 2)
	checkHead(t, pool, before)
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	after := writeChainPatterns(t, pool, 3, 2)
	checkHead(t, pool, before+after)
	verifyChain(t, pool, before+after)
}
