package transport_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

// TestPerHookConcurrencyCap: a subscription's max_in_flight holds across two
// instances, and its slow receiver does not hold up another subscription.
func TestPerHookConcurrencyCap(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(int, webhooktest.Request) webhooktest.Answer {
		return webhooktest.Answer{Delay: 300 * time.Millisecond}
	})
	hook := f.subscribe(t, rc, func(s *webhooktest.Subscription) { s.MaxInFlight = 2 })
	free := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	f.subscribe(t, free, nil)
	f.start(t, webhooktest.Config{Workers: 8})
	f.start(t, webhooktest.Config{Workers: 8})

	const n = 8
	start := time.Now()
	for range n {
		f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageFileUploaded, 0))
	}
	free.WaitN(t, n, 30*time.Second)
	if took := time.Since(start); took > time.Duration(n/2)*300*time.Millisecond {
		t.Errorf("the fast receiver waited for the slow one: %s for %d deliveries", took, n)
	}
	rc.WaitN(t, n, 30*time.Second)
	if m := rc.MaxInFlight(); m != 2 {
		t.Errorf("%d requests in flight at once to one subscription across two instances, want 2 (max_in_flight)", m)
	}
	webhooktest.Eventually(t, 10*time.Second, "all succeeded", func() bool {
		for _, d := range webhooktest.Deliveries(t, f.pool, hook) {
			if d.Status != app.StatusSucceeded || d.Attempts != 1 {
				return false
			}
		}
		return true
	})
}

// TestRateLimitAcrossInstances: a subscription's rate_limit holds for two instances
// together.
func TestRateLimitAcrossInstances(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	f.subscribe(t, rc, func(s *webhooktest.Subscription) { s.RateLimit = 10 })
	a := f.start(t, webhooktest.Config{})
	b := f.start(t, webhooktest.Config{})
	_, _ = a, b
	// Both heartbeats are in before the burst.
	webhooktest.Eventually(t, 10*time.Second, "two instances alive", func() bool {
		var n int
		err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_dispatchers`).Scan(&n)
		return err == nil && n == 2
	})
	time.Sleep(300 * time.Millisecond) // each has counted the other
	const n = 20
	for range n {
		f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	}
	reqs := rc.WaitN(t, n, 30*time.Second)
	// 10/s across both, a burst of one each: 20 deliveries take at least ~1.8s.
	if span := reqs[n-1].At.Sub(reqs[0].At); span < 1700*time.Millisecond {
		t.Errorf("%d deliveries within %s, faster than rate_limit 10/s", n, span)
	}
}

// TestRaisedMaxInFlightTakesEffect: a subscription's jobs run on workers of its own,
// at most its max_in_flight; raising max_in_flight while the dispatcher runs lets that
// many attempts run at once (more workers start), and never more.
func TestRaisedMaxInFlightTakesEffect(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(int, webhooktest.Request) webhooktest.Answer {
		return webhooktest.Answer{Delay: 300 * time.Millisecond}
	})
	hook := f.subscribe(t, rc, func(s *webhooktest.Subscription) { s.MaxInFlight = 1 })
	f.start(t, webhooktest.Config{Workers: 8})
	for range 3 {
		f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	}
	rc.WaitN(t, 3, 20*time.Second)
	if m := rc.MaxInFlight(); m != 1 {
		t.Fatalf("%d requests in flight at once with max_in_flight 1", m)
	}

	ctx := context.Background()
	if _, err := f.pool.Exec(ctx, `UPDATE webhook_subscriptions SET max_in_flight = 4 WHERE id = $1`, hook); err != nil {
		t.Fatal(err)
	}
	cons := f.streams.Options.HookConsumer(hook)
	webhooktest.Eventually(t, 10*time.Second, "the delivery consumer's MaxAckPending raised to 4", func() bool {
		c, err := f.js.Consumer(ctx, f.streams.Options.EventsStream, cons)
		return err == nil && c.CachedInfo().Config.MaxAckPending == 4
	})
	for range 12 {
		f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	}
	rc.WaitN(t, 15, 30*time.Second)
	if m := rc.MaxInFlight(); m != 4 {
		t.Errorf("%d requests in flight at once after max_in_flight was raised to 4, want 4", m)
	}
	webhooktest.Eventually(t, 10*time.Second, "all succeeded once", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		if len(ds) != 15 {
			return false
		}
		for _, d := range ds {
			if d.Status != app.StatusSucceeded || d.Attempts != 1 {
				return false
			}
		}
		return true
	})
}

// TestRetriesShareMaxInFlight: due retries come back through their subscription's own
// consumer, so first attempts and retries together stay within max_in_flight, across
// two instances.
func TestRetriesShareMaxInFlight(t *testing.T) {
	f := setup(t)
	var mu sync.Mutex
	seen := map[string]bool{}
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(_ int, r webhooktest.Request) webhooktest.Answer {
		mu.Lock()
		defer mu.Unlock()
		if !seen[r.Delivery] { // every delivery's first attempt fails
			seen[r.Delivery] = true
			return webhooktest.Answer{Status: http.StatusInternalServerError, Delay: 100 * time.Millisecond}
		}
		return webhooktest.Answer{Status: http.StatusNoContent, Delay: 100 * time.Millisecond}
	})
	hook := f.subscribe(t, rc, func(s *webhooktest.Subscription) { s.MaxInFlight = 2 })
	cfg := webhooktest.Config{Workers: 8, Schedule: webhooktest.Schedule(50*time.Millisecond, 7)}
	f.start(t, cfg)
	f.start(t, cfg)

	const n = 12
	for range n {
		f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	}
	rc.WaitN(t, 2*n, 30*time.Second)
	if m := rc.MaxInFlight(); m != 2 {
		t.Errorf("%d requests in flight at once, first attempts and retries together, want 2 (max_in_flight)", m)
	}
	webhooktest.Eventually(t, 10*time.Second, "all succeeded at their second attempt", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		for _, d := range ds {
			if d.Status != app.StatusSucceeded || d.Attempts != 2 {
				return false
			}
		}
		return len(ds) == n
	})
}
