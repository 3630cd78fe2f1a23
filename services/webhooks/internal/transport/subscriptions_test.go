package transport_test

import (
	"context"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

func TestDeletedSubscriptionDropsItsJobs(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), answers(500))
	hook := f.subscribe(t, rc, nil)
	in := f.start(t, webhooktest.Config{Schedule: webhooktest.Schedule(300*time.Millisecond, 7)})

	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	rc.WaitN(t, 1, 20*time.Second)
	if _, err := f.pool.Exec(context.Background(), `DELETE FROM webhook_subscriptions WHERE id = $1`, hook); err != nil {
		t.Fatal(err)
	}
	webhooktest.Eventually(t, 10*time.Second, "job dropped", func() bool {
		return gauge(t, in.Registry, "shipfile_webhook_queue_depth") == 0
	})
	n := len(rc.Requests())
	time.Sleep(time.Second)
	if m := len(rc.Requests()); m != n || n > 2 {
		t.Errorf("requests went on after the subscription was deleted: %d, then %d", n, m)
	}
}

// TestChangesReachEveryInstanceWithinASecond: while events flow, a subscription
// disabled (as the gateway does, one UPDATE) and another deleted get no request that
// starts more than a second later, from either of two instances.
func TestChangesReachEveryInstanceWithinASecond(t *testing.T) {
	f := setup(t)
	disabled := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	deleted := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	dis := f.subscribe(t, disabled, nil)
	del := f.subscribe(t, deleted, nil)
	f.start(t, webhooktest.Config{})
	f.start(t, webhooktest.Config{})

	stop := f.keepPublishing(t)
	defer stop()
	disabled.WaitN(t, 5, 20*time.Second)
	deleted.WaitN(t, 5, 20*time.Second)

	ctx := context.Background()
	if _, err := f.pool.Exec(ctx, `UPDATE webhook_subscriptions SET active = false, disabled_reason = 'disabled by an admin' WHERE id = $1`, dis); err != nil {
		t.Fatal(err)
	}
	changedAt := time.Now()
	if _, err := f.pool.Exec(ctx, `DELETE FROM webhook_subscriptions WHERE id = $1`, del); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	for name, rc := range map[string]*webhooktest.Receiver{"disabled": disabled, "deleted": deleted} {
		for _, r := range rc.Requests() {
			if late := r.At.Sub(changedAt); late > time.Second {
				t.Errorf("%s subscription got a request %s after the change", name, late.Round(time.Millisecond))
			}
		}
	}
}

// TestCacheFailsSafeWhenTheListenerDrops: with the LISTEN connection killed, a
// subscription disabled at that moment still gets nothing more within a second (the
// stale cache reads the database until the listener is back).
func TestCacheFailsSafeWhenTheListenerDrops(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	hook := f.subscribe(t, rc, nil)
	f.start(t, webhooktest.Config{})
	stop := f.keepPublishing(t)
	defer stop()
	rc.WaitN(t, 5, 20*time.Second)

	// Deliveries do not wait for the listener (the cache reads the database until it
	// listens), so under load its LISTEN may come after the first deliveries: kill it
	// once it is there.
	ctx := context.Background()
	var killed int
	webhooktest.Eventually(t, 10*time.Second, "the listener connection terminated", func() bool {
		err := f.pool.QueryRow(ctx, `
			SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND (query LIKE 'LISTEN %' OR query = '-- ping')`).Scan(&killed)
		if err != nil {
			t.Fatalf("terminate the listener connection: %v", err)
		}
		return killed > 0
	})
	if killed != 1 {
		t.Fatalf("terminated %d listener connections, want 1", killed)
	}
	if _, err := f.pool.Exec(ctx, `UPDATE webhook_subscriptions SET active = false WHERE id = $1`, hook); err != nil {
		t.Fatal(err)
	}
	changedAt := time.Now()
	time.Sleep(2 * time.Second)
	for _, r := range rc.Requests() {
		if late := r.At.Sub(changedAt); late > time.Second {
			t.Fatalf("a request %s after the subscription was disabled, with the listener down", late.Round(time.Millisecond))
		}
	}
}
