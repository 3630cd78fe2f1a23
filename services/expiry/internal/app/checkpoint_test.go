package app_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/expiry/internal/app"
)

// TestAuditCheckpoint: two instances ticking at once write one audit.checkpoint event
// (an outbox row, published by the relay) carrying the chain's head and anchor; a tick
// before the interval has passed writes none.
func TestAuditCheckpoint(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	bucket := servicetest.Bucket(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO audit_log (actor, action) SELECT 'system', 'test.entry' FROM generate_series(1, 3)`); err != nil {
		t.Fatal(err)
	}
	opts := app.Options{BatchSize: 10, AuditCheckpoint: time.Hour}
	a, b := newService(t, pool, bucket, nil, opts), newService(t, pool, bucket, nil, opts)
	var wg sync.WaitGroup
	results := make([]app.TickResult, 2)
	for i, svc := range []*app.Expirer{a.Expirer, b.Expirer} {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = svc.Tick(ctx) }()
	}
	wg.Wait()
	if results[0].Err != nil || results[1].Err != nil || results[0].AuditCheckpoints+results[1].AuditCheckpoints != 1 {
		t.Fatalf("ticks %+v / %+v: want one checkpoint between them", results[0], results[1])
	}
	var payload []byte
	if err := pool.QueryRow(ctx, `SELECT payload FROM outbox WHERE subject = $1`, events.Subject(events.TypeAuditCheckpoint)).Scan(&payload); err != nil {
		t.Fatalf("the checkpoint's outbox row: %v", err)
	}
	env, err := events.UnmarshalEnvelope(payload)
	if err != nil {
		t.Fatal(err)
	}
	cp := env.GetAuditCheckpoint()
	var seq int64
	var hash string
	if err := pool.QueryRow(ctx, `SELECT seq, hash FROM audit_chain_head`).Scan(&seq, &hash); err != nil {
		t.Fatal(err)
	}
	if env.GetType() != events.TypeAuditCheckpoint || cp.GetSeq() != 3 || cp.GetSeq() != seq || cp.GetHash() != hash ||
		cp.GetAnchorSeq() != 0 || cp.GetAnchorHash() != "0000000000000000000000000000000000000000000000000000000000000000" {
		t.Fatalf("checkpoint %v; want the head %d %s and the empty anchor", cp, seq, hash)
	}
	if r := a.Expirer.Tick(ctx); r.Err != nil || r.AuditCheckpoints != 0 {
		t.Fatalf("a tick within the hour: %+v, want no checkpoint", r)
	}
}
