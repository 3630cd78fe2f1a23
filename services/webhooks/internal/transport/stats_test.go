package transport_test

import (
	"context"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

func TestOldestPendingGauge(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), answers(503))
	hook := f.subscribe(t, rc, nil)
	if _, err := f.pool.Exec(context.Background(), `
		INSERT INTO webhook_deliveries (id, subscription_id, event_id, event, body, created_at)
		VALUES (gen_random_uuid(), $1, 'old-event', 'package.created', '{}', now() - interval '1 hour')`, hook); err != nil {
		t.Fatal(err)
	}
	in := f.start(t, webhooktest.Config{})
	webhooktest.Eventually(t, 10*time.Second, "oldest pending about an hour", func() bool {
		g := gauge(t, in.Registry, "shipfile_webhook_oldest_pending_seconds")
		return g >= 3600 && g < 3700
	})
}

// TestOldestPendingGaugeCountsQueuedJobs: a delivery has no row until its first
// attempt, so the jobs queued behind a slow receiver (max_in_flight 1) count from the
// queue: the gauge grows while they wait (every attempt succeeds, so no row is ever
// pending), and falls to 0 once all are delivered.
func TestOldestPendingGaugeCountsQueuedJobs(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(int, webhooktest.Request) webhooktest.Answer {
		return webhooktest.Answer{Delay: 3 * time.Second}
	})
	hook := f.subscribe(t, rc, func(s *webhooktest.Subscription) { s.MaxInFlight = 1 })
	in := f.start(t, webhooktest.Config{Timeout: 10 * time.Second})
	for range 3 {
		f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	}
	webhooktest.Eventually(t, 10*time.Second, "oldest pending over a second", func() bool {
		return gauge(t, in.Registry, "shipfile_webhook_oldest_pending_seconds") >= 1
	})
	webhooktest.Eventually(t, 20*time.Second, "all delivered", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		return len(ds) == 3 && ds[0].Status == app.StatusSucceeded && ds[1].Status == app.StatusSucceeded && ds[2].Status == app.StatusSucceeded
	})
	webhooktest.Eventually(t, 5*time.Second, "no pending delivery", func() bool {
		return gauge(t, in.Registry, "shipfile_webhook_oldest_pending_seconds") == 0
	})
}
