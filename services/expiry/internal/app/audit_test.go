package app_test

import (
	"context"
	"testing"
	"time"

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
}
