package auditdb_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
	"github.com/shipfile/shipfile/services/gateway/internal/store/auditdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/storetest"
)

// verifyChain verifies the whole chain and fails the test on a break.
func verifyChain(t *testing.T, pool *pgxpool.Pool, wantCount int64) {
	t.Helper()
	res, err := audit.NewChain(auditdb.NewStore(sqldb.NewDB(pool))).Verify(context.Background(), 0)
	if err != nil || res.Break != nil || res.Count != wantCount || res.Head != wantCount {
		t.Fatalf("verify: %+v, %v; want %d entries whole", res, err, wantCount)
	}
}

// TestAuditCanonicalMatchesDatabase: for entries of every shape (absent and present
// ids, quotes, backslashes, control characters, non-ASCII text, times in any zone and
// to the microsecond), the Go canonical JSON and hash are the bytes the database's
// trigger chained.
func TestAuditCanonicalMatchesDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	rng := rand.New(rand.NewPCG(1, 2))
	text := func() string {
		alphabet := []rune("ab \"\\/\b\f\n\r\t\x01\x1f\x7fé€😀<>&\u2028'")
		r := make([]rune, rng.IntN(12))
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(r)
	}
	maybeID := func() *uuid.UUID {
		if rng.IntN(2) == 0 {
			return nil
		}
		id := uuid.New()
		return &id
	}
	const n = 400
	for i := range n {
		var user *int64
		if rng.IntN(2) == 0 {
			u := rng.Int64N(1 << 40)
			user = &u
		}
		at := time.Date(2020+rng.IntN(10), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1e9), time.FixedZone("z", 3600*(rng.IntN(25)-12)))
		if _, err := pool.Exec(ctx, `INSERT INTO audit_log (created_at, actor, actor_user_id, action, package_id, file_id, recipient_id, ip, user_agent, detail)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			at, []string{"user", "link", "system"}[i%3], user, text(), maybeID(), maybeID(), maybeID(), text(), text(), text()); err != nil {
			t.Fatal(err)
		}
	}
	q := auditdb.New(pool)
	rows, err := q.AuditCanonical(ctx, auditdb.AuditCanonicalParams{FirstSeq: 1, LastSeq: n})
	if err != nil || len(rows) != n {
		t.Fatalf("%d canonical rows, %v", len(rows), err)
	}
	var entries []audit.Entry
	err = auditdb.NewStore(sqldb.NewDB(pool)).ReadChain(ctx, func(r audit.ChainReader) error {
		entries, err = r.Entries(ctx, 0, n, n)
		return err
	})
	if err != nil || len(entries) != n {
		t.Fatalf("%d entries, %v", len(entries), err)
	}
	for i, e := range entries {
		if got := string(audit.Canonical(e)); got != rows[i].Canonical {
			t.Fatalf("entry %d:\n  go %s\n sql %s", e.Seq, got, rows[i].Canonical)
		}
		if got := audit.Hash(e, e.PrevHash); got != rows[i].Hash || got != e.Hash {
			t.Fatalf("entry %d: go hash %s, sql %s, stored %s", e.Seq, got, rows[i].Hash, e.Hash)
		}
	}
	verifyChain(t, pool, n)
}

// TestAuditChainConcurrentWriters: two gateway instances (stores on pools of their
// own) creating packages in shared group commits, transactions writing entries at once
// (some rolled back), and the expiry service's many-row insert, all at the same time,
// make one gapless chain that verifies; an hourly counter of anonymous failures stays
// outside it.
func TestAuditChainConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	owner := storetest.InsertUser(t, pool, "o@example.com", "O")
	other, err := pgxpool.New(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	gateways := []*store.Postgres{store.NewPostgres(pool), store.NewPostgres(other)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	committed := 0
	errs := make(chan error, 64)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				tx, err := pool.Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				k := 1 + i%3
				for j := range k {
					if _, err := tx.Exec(ctx, `INSERT INTO audit_log (actor, action, detail) VALUES ('system', 'test.write', $1)`, fmt.Sprintf("%d/%d/%d", w, i, j)); err != nil {
						errs <- err
						return
					}
				}
				if i%5 == 4 {
					_ = tx.Rollback(ctx)
					continue
				}
				if err := tx.Commit(ctx); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				committed += k
				mu.Unlock()
			}
		}()
	}
	// The expiry service writes its entries in one statement per batch.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 10 {
			if _, err := other.Exec(ctx, `INSERT INTO audit_log (actor, action, package_id)
				SELECT 'system', a.action, NULL FROM unnest(ARRAY['package.expired', 'package.expired', 'package.expired']) WITH ORDINALITY AS a (action, n) ORDER BY a.n`); err != nil {
				errs <- err
				return
			}
			mu.Lock()
			committed += 3
			mu.Unlock()
		}
	}()
	for g := range 4 {
		db := gateways[g%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				p := storetest.DraftPackage(owner, time.Now())
				uid := owner
				a := app.AuditEntry{Actor: "user", ActorUserID: &uid, Action: "package.create", PackageID: &p.ID}
				if err := db.CreatePackage(ctx, p, app.Effects{Audit: []app.AuditEntry{a}}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				committed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO audit_log (actor, action, ip, hour) VALUES ('link', 'link.invalid', '198.51.100.1', date_trunc('hour', now()))
		ON CONFLICT (action, ip, hour) WHERE hour IS NOT NULL DO UPDATE SET hits = audit_log.hits + 1`); err != nil {
		t.Fatal(err)
	}
	var rows, maxSeq, unchained int64
	if err := pool.QueryRow(ctx, `SELECT count(seq), coalesce(max(seq), 0), count(*) FILTER (WHERE seq IS NULL) FROM audit_log`).Scan(&rows, &maxSeq, &unchained); err != nil {
		t.Fatal(err)
	}
	if rows != int64(committed) || maxSeq != rows || unchained != 1 {
		t.Fatalf("%d chained entries up to seq %d, %d outside; want %d committed, gapless, 1 counter outside", rows, maxSeq, unchained, committed)
	}
	verifyChain(t, pool, int64(committed))
}
