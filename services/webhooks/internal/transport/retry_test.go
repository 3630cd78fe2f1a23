package transport_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/tracing"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

func TestRetriesUntilSuccess(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), answers(500, 500, 200))
	hook := f.subscribe(t, rc, nil)
	in := f.start(t, webhooktest.Config{Schedule: webhooktest.Schedule(200*time.Millisecond, 7)})

	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	reqs := rc.WaitN(t, 3, 20*time.Second)
	for _, r := range reqs {
		if r.Delivery != reqs[0].Delivery || !r.ServiceSignatureOK || !r.StandardSignatureOK {
			t.Errorf("request %+v: want the same delivery id, signed", r.Header)
		}
	}
	for i := 1; i < 3; i++ {
		if gap := reqs[i].At.Sub(reqs[i-1].At); gap < 150*time.Millisecond {
			t.Errorf("retry %d came after %s, want the schedule's ~200ms", i, gap)
		}
	}
	webhooktest.Eventually(t, 10*time.Second, "delivery succeeded", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		return len(ds) == 1 && ds[0].Status == app.StatusSucceeded
	})
	d := webhooktest.Deliveries(t, f.pool, hook)[0]
	as := webhooktest.Attempts(t, f.pool, d.ID)
	if len(as) != 3 || d.Attempts != 3 {
		t.Fatalf("%d attempts logged, delivery says %d; want 3", len(as), d.Attempts)
	}
	for i, want := range []int{500, 500, 200} {
		if as[i].Attempt != i+1 || as[i].StatusCode == nil || *as[i].StatusCode != want {
			t.Errorf("attempt %d: %+v, want status %d", i+1, as[i], want)
		}
	}
	if as[0].Error == nil || !strings.Contains(*as[0].Error, "500") || as[2].Error != nil {
		t.Errorf("attempt errors: %v, %v", as[0].Error, as[2].Error)
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(rc.Requests()); n != 3 {
		t.Errorf("%d requests after success, want 3", n)
	}
	if got := counter(t, in.Registry, "shipfile_webhook_deliveries_total", "retried"); got != 2 {
		t.Errorf("retried = %v, want 2", got)
	}
}

// TestRetriesKeepTheTrace: each attempt of a delivery, the retries too, sends the
// receiver the trace id of the event's message.
func TestRetriesKeepTheTrace(t *testing.T) {
	if _, err := tracing.Setup(context.Background(), "webhooks-test"); err != nil { // the W3C propagator; exporting off
		t.Fatal(err)
	}
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), answers(500, 500, 200))
	f.subscribe(t, rc, nil)
	f.start(t, webhooktest.Config{Schedule: webhooktest.Schedule(200*time.Millisecond, 7)})

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	env := webhooktest.Envelope(events.TypePackageCreated, 0)
	data, err := events.MarshalEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(f.streams.EventsPrefix + "." + env.GetType())
	msg.Data = data
	msg.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.js.PublishMsg(ctx, msg, jetstream.WithMsgID(env.GetEventId())); err != nil {
		t.Fatal(err)
	}
	reqs := rc.WaitN(t, 3, 20*time.Second)
	for i, r := range reqs {
		tp := r.Header.Get("Traceparent")
		if parts := strings.Split(tp, "-"); len(parts) != 4 || parts[1] != traceID {
			t.Errorf("attempt %d: traceparent %q, want trace %s", i+1, tp, traceID)
		}
	}
}

func TestSlowReceiverIsRetriedThroughTheScheduleThenFails(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(int, webhooktest.Request) webhooktest.Answer {
		return webhooktest.Answer{Delay: 5 * time.Second}
	})
	hook := f.subscribe(t, rc, nil)
	schedule := webhooktest.Schedule(100*time.Millisecond, 7)
	in := f.start(t, webhooktest.Config{Schedule: schedule, Timeout: 300 * time.Millisecond})

	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageExpired, 0))
	webhooktest.Eventually(t, 30*time.Second, "delivery failed", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		return len(ds) == 1 && ds[0].Status == app.StatusFailed
	})
	d := webhooktest.Deliveries(t, f.pool, hook)[0]
	as := webhooktest.Attempts(t, f.pool, d.ID)
	if len(as) != len(schedule)+1 || d.Attempts != 8 || d.RoundAttempts != 8 {
		t.Fatalf("%d attempts logged (delivery: %d, round %d), want 8", len(as), d.Attempts, d.RoundAttempts)
	}
	for i, a := range as {
		if a.Attempt != i+1 || a.StatusCode != nil || a.Error == nil || !strings.Contains(*a.Error, "no response within 300ms") {
			t.Errorf("attempt %d: %+v", i+1, a)
		}
		if a.DurationMS < 250 || a.DurationMS > 2000 {
			t.Errorf("attempt %d took %dms, want about the 300ms timeout", i+1, a.DurationMS)
		}
	}
	if d.LastError == nil || !strings.Contains(*d.LastError, "no response") {
		t.Errorf("last_error %v", d.LastError)
	}
	if n := len(rc.Requests()); n != 8 {
		t.Errorf("receiver saw %d requests, want 8", n)
	}
	// The job is acknowledged: nothing is left on the queue.
	webhooktest.Eventually(t, 5*time.Second, "queue empty", func() bool {
		return gauge(t, in.Registry, "shipfile_webhook_queue_depth") == 0
	})
	if got := counter(t, in.Registry, "shipfile_webhook_deliveries_total", "failed"); got != 1 {
		t.Errorf("failed = %v, want 1", got)
	}
	if s := webhooktest.SubscriptionState(t, f.pool, hook); s.FailingSince == nil || !s.Active {
		t.Errorf("subscription %+v: want failing since the first attempt, still active", s)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(nth int, _ webhooktest.Request) webhooktest.Answer {
		if nth == 1 {
			return webhooktest.Answer{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}}
		}
		return webhooktest.Answer{}
	})
	f.subscribe(t, rc, nil)
	f.start(t, webhooktest.Config{Schedule: webhooktest.Schedule(100*time.Millisecond, 7)})

	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageRevoked, 0))
	reqs := rc.WaitN(t, 2, 20*time.Second)
	if gap := reqs[1].At.Sub(reqs[0].At); gap < time.Second {
		t.Errorf("second attempt %s after a 429 with Retry-After: 1, want at least 1s", gap)
	}
}

func TestGoneDisablesSubscription(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), answers(http.StatusGone))
	hook := f.subscribe(t, rc, nil)
	in := f.start(t, webhooktest.Config{})

	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageDeleted, 0))
	webhooktest.Eventually(t, 20*time.Second, "subscription disabled", func() bool {
		return !webhooktest.SubscriptionState(t, f.pool, hook).Active
	})
	s := webhooktest.SubscriptionState(t, f.pool, hook)
	if s.DisabledReason == nil || *s.DisabledReason != "the receiver answered 410 Gone" || s.DisabledAt == nil {
		t.Errorf("subscription %+v", s)
	}
	webhooktest.Eventually(t, 5*time.Second, "delivery failed", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		return len(ds) == 1 && ds[0].Status == app.StatusFailed && ds[0].Attempts == 1
	})
	if got := counter(t, in.Registry, "shipfile_webhook_deliveries_total", "disabled"); got != 1 {
		t.Errorf("disabled = %v, want 1", got)
	}
	// A disabled subscription gets no more events.
	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	time.Sleep(time.Second)
	if n := len(rc.Requests()); n != 1 {
		t.Errorf("%d requests, want only the one answered 410", n)
	}
}

// TestDisabledAfterFailingTooLong: the health pass, which derives failing_since from
// the attempt log, disables a subscription failing for DisableAfter; its pending
// delivery then fails without another attempt.
func TestDisabledAfterFailingTooLong(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), answers(500))
	hook := f.subscribe(t, rc, nil)
	f.start(t, webhooktest.Config{DisableAfter: 120 * time.Hour, Schedule: webhooktest.Schedule(3*time.Second, 7)})

	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	rc.WaitN(t, 1, 20*time.Second)
	webhooktest.Eventually(t, 5*time.Second, "failing_since from the attempt log", func() bool {
		return webhooktest.SubscriptionState(t, f.pool, hook).FailingSince != nil
	})
	// The streak started six days ago.
	if _, err := f.pool.Exec(context.Background(),
		`UPDATE webhook_subscriptions SET failing_since = now() - interval '6 days' WHERE id = $1`, hook); err != nil {
		t.Fatal(err)
	}
	webhooktest.Eventually(t, 5*time.Second, "subscription disabled", func() bool {
		return !webhooktest.SubscriptionState(t, f.pool, hook).Active
	})
	if s := webhooktest.SubscriptionState(t, f.pool, hook); s.DisabledReason == nil || *s.DisabledReason != "every delivery failed for 5 days" {
		t.Errorf("disabled_reason %v", s.DisabledReason)
	}
	webhooktest.Eventually(t, 10*time.Second, "delivery failed", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		return len(ds) == 1 && ds[0].Status == app.StatusFailed
	})
	if n := len(rc.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestRetryWaitHoldsNoSlot: a delivery waiting for its next attempt does not take one
// of its subscription's max_in_flight slots, so the next deliveries go out meanwhile.
func TestRetryWaitHoldsNoSlot(t *testing.T) {
	f := setup(t)
	var mu sync.Mutex
	failing := "" // the first delivery fails its first attempt
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(nth int, r webhooktest.Request) webhooktest.Answer {
		mu.Lock()
		defer mu.Unlock()
		if failing == "" {
			failing = r.Delivery
		}
		if r.Delivery == failing && nth == 1 {
			return webhooktest.Answer{Status: http.StatusInternalServerError}
		}
		return webhooktest.Answer{Status: http.StatusNoContent}
	})
	hook := f.subscribe(t, rc, func(s *webhooktest.Subscription) { s.MaxInFlight = 1 })
	f.start(t, webhooktest.Config{Schedule: webhooktest.Schedule(5*time.Second, 7)})

	first := webhooktest.Envelope(events.TypePackageCreated, 0)
	f.streams.Publish(t, f.js, first)
	rc.WaitN(t, 1, 20*time.Second)
	start := time.Now()
	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	rc.WaitN(t, 2, 20*time.Second)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the second delivery waited %s behind the first one's retry", took)
	}
	reqs := rc.WaitN(t, 3, 20*time.Second)
	if reqs[2].Delivery != reqs[0].Delivery || reqs[2].At.Sub(reqs[0].At) < 4*time.Second { // 5s less the jitter
		t.Errorf("the retry came %s after the first attempt (delivery %s, then %s), want the same delivery after about 5s",
			reqs[2].At.Sub(reqs[0].At), reqs[0].Delivery, reqs[2].Delivery)
	}
	webhooktest.Eventually(t, 10*time.Second, "both succeeded", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		return len(ds) == 2 && ds[0].Status == app.StatusSucceeded && ds[1].Status == app.StatusSucceeded
	})
}
