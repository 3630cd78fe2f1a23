package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/expiry/internal/app"
	"github.com/shipfile/shipfile/services/expiry/internal/expirytest"
)

// TestTickRemovesAuditPastRetention: audit entries older than AuditRetention
// (SHIPFILE_AUDIT_RETENTION) go, batch after batch; younger ones stay; without a
// retention nothing goes.
func TestTickRemovesAuditPastRetention(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	bucket := servicetest.Bucket(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO audit_log (actor, action, ip, created_at)
		SELECT 'link', 'link.invalid', '203.0.113.' || (g % 200), now() - interval '400 days' + g * interval '1 minute'
		FROM generate_series(1, 7) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO audit_log (actor, action, created_at) VALUES
		('system', 'package.expire', now() - interval '364 days'), ('link', 'link.view', now())`); err != nil {
		t.Fatal(err)
	}
	count := func() int { return expirytest.Count(t, pool, `SELECT count(*) FROM audit_log`) }

	keep := newService(t, pool, bucket, nil, app.Options{})
	if r := keep.Expirer.Tick(ctx); r.Err != nil || r.AuditRemoved != 0 || count() != 9 {
		t.Fatalf("a tick without a retention: %+v, %d entries left, want 9", r, count())
	}
	svc := newService(t, pool, bucket, nil, app.Options{AuditRetention: 365 * 24 * time.Hour, BatchSize: 3})
	r := svc.Expirer.Tick(ctx)
	if r.Err != nil || r.AuditRemoved != 7 || count() != 2 {
		t.Fatalf("tick: %+v, %d entries left, want 7 removed and 2 left", r, count())
	}
	if got := testutil.ToFloat64(svc.Metrics.AuditEntriesRemoved); got != 7 {
		t.Fatalf("audit entries removed = %v, want 7", got)
	}
	// The chain's anchor is the last entry removed, and what remains links to it.
	var anchorSeq, firstSeq, broken int64
	var anchorHash, firstPrev string
	if err := pool.QueryRow(ctx, `SELECT a.seq, a.hash, f.seq, f.prev_hash,
		(SELECT count(*) FROM audit_log x WHERE x.seq IS NOT NULL AND audit_hash(x) <> x.hash)
		FROM audit_chain_anchor a, (SELECT seq, prev_hash FROM audit_log WHERE seq IS NOT NULL ORDER BY seq LIMIT 1) f`).
		Scan(&anchorSeq, &anchorHash, &firstSeq, &firstPrev, &broken); err != nil {
		t.Fatal(err)
	}
	if anchorSeq != 7 || firstSeq != 8 || firstPrev != anchorHash || broken != 0 {
		t.Fatalf("anchor %d %s, first entry %d with prev_hash %s, %d entries not matching their hash; want anchor 7 and entry 8 linked to it",
			anchorSeq, anchorHash, firstSeq, firstPrev, broken)
	}
}

// TestAuditRetentionStopsAtALegalHold: retention removes the chain's old entries in
// order up to the first one of a package under a legal hold, and goes on past it once
// the hold is released.
func TestAuditRetentionStopsAtALegalHold(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	bucket := servicetest.Bucket(t)
	ctx := context.Background()
	held := uuid.New()
	if _, err := pool.Exec(ctx, `INSERT INTO audit_log (actor, action, package_id, created_at)
		SELECT 'system', 'test.old', CASE WHEN g = 4 THEN $1::uuid END, now() - interval '400 days' + g * interval '1 minute'
		FROM generate_series(1, 6) g`, held); err != nil {
		t.Fatal(err)
	}
	var hold uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO legal_holds (id, package_id, reason) VALUES (gen_random_uuid(), $1, 'case 7') RETURNING id`, held).Scan(&hold); err != nil {
		t.Fatal(err)
	}
	count := func() int { return expirytest.Count(t, pool, `SELECT count(*) FROM audit_log`) }
	svc := newService(t, pool, bucket, nil, app.Options{AuditRetention: 365 * 24 * time.Hour, BatchSize: 10})
	if r := svc.Expirer.Tick(ctx); r.Err != nil || r.AuditRemoved != 3 || count() != 3 {
		t.Fatalf("tick under the hold: %+v, %d entries left; want 3 removed (up to the held one), 3 left", r, count())
	}
	if _, err := pool.Exec(ctx, `UPDATE legal_holds SET released_at = now() WHERE id = $1`, hold); err != nil {
		t.Fatal(err)
	}
	if r := svc.Expirer.Tick(ctx); r.Err != nil || r.AuditRemoved != 3 || count() != 0 {
		t.Fatalf("tick after the release: %+v, %d entries left; want the other 3 removed", r, count())
	}
}
