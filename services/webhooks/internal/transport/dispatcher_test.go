package transport_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventstest"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/signing"
	"github.com/shipfile/shipfile/services/webhooks/internal/transport"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

// fixture is one test's database and streams.
type fixture struct {
	pool    *pgxpool.Pool
	js      jetstream.JetStream
	streams webhooktest.Streams
}

func setup(t *testing.T) fixture {
	t.Helper()
	t.Parallel()
	pool, _ := schematest.Pool(t)
	js := eventstest.Connect(t)
	return fixture{pool: pool, js: js, streams: webhooktest.NewStreams(t, js)}
}

// start runs a dispatcher on the fixture that may reach the test's loopback receivers.
func (f fixture) start(t *testing.T, cfg webhooktest.Config) *webhooktest.Instance {
	t.Helper()
	cfg.Pool, cfg.JS, cfg.Streams = f.pool, f.js, f.streams
	if !cfg.AllowPrivate {
		cfg.AllowPrivate = true
	}
	return webhooktest.Start(t, cfg)
}

func (f fixture) subscribe(t *testing.T, rc *webhooktest.Receiver, mod func(*webhooktest.Subscription)) int64 {
	t.Helper()
	s := webhooktest.Subscription{URL: rc.URL, Secret: rc.Secret}
	if mod != nil {
		mod(&s)
	}
	return webhooktest.InsertSubscription(t, f.pool, s)
}

// keepPublishing publishes a package.created event every 20 ms until the returned
// stop is called; stop returns once the publisher has ended.
func (f fixture) keepPublishing(t *testing.T) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
		}
	}()
	return func() { close(quit); <-done }
}

func answers(codes ...int) webhooktest.Respond {
	return func(nth int, _ webhooktest.Request) webhooktest.Answer {
		if nth <= len(codes) {
			return webhooktest.Answer{Status: codes[nth-1]}
		}
		return webhooktest.Answer{Status: codes[len(codes)-1]}
	}
}

func TestDeliversSignedRequest(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(int, webhooktest.Request) webhooktest.Answer {
		return webhooktest.Answer{Status: http.StatusNoContent}
	})
	hook := f.subscribe(t, rc, nil)
	in := f.start(t, webhooktest.Config{})

	env := webhooktest.Envelope(events.TypePackageFinalized, 0)
	f.streams.Publish(t, f.js, env)
	req := rc.WaitN(t, 1, 20*time.Second)[0]

	_, wantBody, err := app.RenderBody(env)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(req.Body, wantBody) {
		t.Errorf("body %s, want %s", req.Body, wantBody)
	}
	if !req.ServiceSignatureOK || !req.StandardSignatureOK {
		t.Errorf("signatures: X-Service-Signature ok %v, webhook-signature ok %v", req.ServiceSignatureOK, req.StandardSignatureOK)
	}
	wantID := app.DeliveryID(env.GetEventId(), hook)
	for k, want := range map[string]string{
		"Content-Type":       "application/json",
		"User-Agent":         "Service-Webhook/1.0",
		"X-Service-Event":    "package.finalized",
		"X-Service-Hook-Id":  itoa(hook),
		"X-Service-Delivery": wantID,
		"Webhook-Id":         wantID,
	} {
		if got := req.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if ts := req.Timestamp; time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
		t.Errorf("webhook-timestamp %d is not now", ts)
	}

	webhooktest.Eventually(t, 10*time.Second, "delivery succeeded", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		return len(ds) == 1 && ds[0].Status == app.StatusSucceeded
	})
	d := webhooktest.Deliveries(t, f.pool, hook)[0]
	if d.ID != wantID || d.EventID != env.GetEventId() || d.Attempts != 1 || d.RoundAttempts != 1 || !bytes.Equal(d.Body, wantBody) {
		t.Errorf("delivery row %+v", d)
	}
	as := webhooktest.Attempts(t, f.pool, d.ID)
	if len(as) != 1 || as[0].Attempt != 1 || as[0].StatusCode == nil || *as[0].StatusCode != 204 || as[0].Error != nil || as[0].ResponseExcerpt == nil {
		t.Errorf("attempts %+v", as)
	}
	// The health pass derives last_success_at from the attempt log.
	webhooktest.Eventually(t, 5*time.Second, "last success recorded", func() bool {
		s := webhooktest.SubscriptionState(t, f.pool, hook)
		return s.LastSuccessAt != nil && s.FailingSince == nil && s.Active
	})
	webhooktest.Eventually(t, 5*time.Second, "metrics", func() bool {
		return counter(t, in.Registry, "shipfile_webhook_deliveries_total", "succeeded") == 1 &&
			histogramCount(t, in.Registry, "shipfile_webhook_attempt_duration_seconds") == 1 &&
			gauge(t, in.Registry, "shipfile_webhook_queue_depth") == 0
	})
}

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

func TestFilteredSubscriptionGetsOnlyItsEvents(t *testing.T) {
	f := setup(t)
	all := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	some := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	f.subscribe(t, all, nil)
	f.subscribe(t, some, func(s *webhooktest.Subscription) { s.Events = []string{events.TypePackageDownloaded} })
	f.start(t, webhooktest.Config{})

	for _, typ := range events.Types {
		f.streams.Publish(t, f.js, webhooktest.Envelope(typ, 0))
	}
	all.WaitN(t, len(events.Types), 20*time.Second)
	time.Sleep(500 * time.Millisecond)
	reqs := some.Requests()
	if len(reqs) != 1 || reqs[0].Event != events.TypePackageDownloaded {
		t.Fatalf("filtered subscription got %d requests (%v), want one package.downloaded", len(reqs), eventsOf(reqs))
	}
	if !strings.Contains(string(reqs[0].Body), `"file_id":null`) {
		t.Errorf("zip download body %s: want file_id null", reqs[0].Body)
	}
}

func TestInactiveSubscriptionGetsOnlyTests(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	hook := f.subscribe(t, rc, func(s *webhooktest.Subscription) { s.Inactive = true })
	// Selecting nothing does not stop the Test button either.
	other := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	otherHook := f.subscribe(t, other, func(s *webhooktest.Subscription) { s.Events = []string{} })
	f.start(t, webhooktest.Config{})

	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypeWebhookTest, hook))
	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypeWebhookTest, otherHook))
	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypeWebhookTest, 999999)) // no such hook
	rc.WaitN(t, 1, 20*time.Second)
	other.WaitN(t, 1, 20*time.Second)
	time.Sleep(500 * time.Millisecond)
	reqs := rc.Requests()
	if len(reqs) != 1 || reqs[0].Event != events.TypeWebhookTest {
		t.Fatalf("inactive subscription got %v, want one webhook.test", eventsOf(reqs))
	}
	if want := `"hook_id":` + itoa(hook) + `,"message":`; !strings.Contains(string(reqs[0].Body), want) {
		t.Errorf("test body %s lacks %s", reqs[0].Body, want)
	}
	if ds := webhooktest.Deliveries(t, f.pool, hook); len(ds) != 1 {
		t.Errorf("%d deliveries for the inactive subscription, want the test's only", len(ds))
	}
	if s := webhooktest.SubscriptionState(t, f.pool, hook); s.Active {
		t.Error("a test delivery must not re-enable a subscription")
	}
}

func TestPrivateTargetRefusedAtDialTime(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	hook := f.subscribe(t, rc, nil)
	cfg := webhooktest.Config{Pool: f.pool, JS: f.js, Streams: f.streams, AllowPrivate: false, Schedule: []time.Duration{time.Hour}}
	webhooktest.Start(t, cfg)

	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageFinalized, 0))
	var d webhooktest.DeliveryRow
	webhooktest.Eventually(t, 20*time.Second, "attempt logged", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		if len(ds) == 1 && ds[0].Attempts == 1 {
			d = ds[0]
			return true
		}
		return false
	})
	as := webhooktest.Attempts(t, f.pool, d.ID)
	if len(as) != 1 || as[0].StatusCode != nil || as[0].Error == nil ||
		!strings.Contains(*as[0].Error, "refused") || !strings.Contains(*as[0].Error, "127.0.0.1") {
		t.Fatalf("attempt %+v: want a dial-time refusal", as)
	}
	if d.Status != app.StatusPending {
		t.Errorf("status %s: a refusal is a failed attempt, retried on the schedule", d.Status)
	}
	if n := len(rc.Requests()); n != 0 {
		t.Fatalf("the receiver got %d requests", n)
	}
}

func TestRotationSignsWithBothSecrets(t *testing.T) {
	f := setup(t)
	newSecret, oldSecret := webhooktest.NewSecret(), webhooktest.NewSecret()
	rc := webhooktest.NewReceiver(t, newSecret, nil)
	f.subscribe(t, rc, func(s *webhooktest.Subscription) {
		s.PreviousSecret, s.PreviousSecretUntil = oldSecret, time.Now().Add(24*time.Hour)
	})
	f.start(t, webhooktest.Config{})

	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	r := rc.WaitN(t, 1, 20*time.Second)[0]
	sig := r.Header.Get("Webhook-Signature")
	if len(strings.Fields(sig)) != 2 {
		t.Fatalf("webhook-signature %q: want two signatures", sig)
	}
	if !r.StandardSignatureOK || !signing.VerifyStandard(oldSecret, r.Delivery, r.Timestamp, r.Body, sig) {
		t.Error("webhook-signature does not verify under both secrets")
	}
	if !r.ServiceSignatureOK || signing.VerifyService(oldSecret, r.Body, r.Header.Get("X-Service-Signature")) {
		t.Error("X-Service-Signature must use the current secret only")
	}
}

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

func TestPoisonMessagesAreTerminated(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	hook := f.subscribe(t, rc, nil)
	f.start(t, webhooktest.Config{})

	f.streams.PublishRaw(t, f.js, "package.created", "garbage-1", []byte("\xff\xff not a protobuf"))
	env := webhooktest.Envelope(events.TypePackageCreated, 0)
	env.Data = nil // decodes, but has nothing to render
	f.streams.Publish(t, f.js, env)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.js.Publish(ctx, f.streams.JobsPrefix+"."+strconv.FormatInt(hook, 10), []byte("\xff\xff"), jetstream.WithMsgID("garbage-job")); err != nil {
		t.Fatal(err)
	}
	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageFinalized, 0))

	rc.WaitN(t, 1, 20*time.Second)
	for _, c := range []struct{ stream, consumer string }{
		{f.streams.Options.EventsStream, f.streams.Options.HookConsumer(hook)},
		{f.streams.Options.JobsStream, transport.QueuedConsumer},
	} {
		webhooktest.Eventually(t, 10*time.Second, c.consumer+" settled everything", func() bool {
			cons, err := f.js.Consumer(context.Background(), c.stream, c.consumer)
			if err != nil {
				t.Fatal(err)
			}
			info, err := cons.Info(context.Background())
			return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0
		})
	}
	if reqs := rc.Requests(); len(reqs) != 1 || reqs[0].Event != events.TypePackageFinalized {
		t.Errorf("got %v", eventsOf(reqs))
	}
}

// TestEventPublishedTwiceKeepsItsDeliveryID: the same event stored twice (another
// message id, as after an outbox relay crashed between publishing a row and deleting it,
// longer ago than the duplicate window) is one delivery: attempted again under the same
// delivery id (at least once), with one row.
func TestEventPublishedTwiceKeepsItsDeliveryID(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	hook := f.subscribe(t, rc, nil)
	f.start(t, webhooktest.Config{})

	env := webhooktest.Envelope(events.TypePackageDownloaded, 0)
	b, err := events.MarshalEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	f.streams.PublishRaw(t, f.js, env.GetType(), env.GetEventId(), b)
	rc.WaitN(t, 1, 20*time.Second)
	f.streams.PublishRaw(t, f.js, env.GetType(), env.GetEventId()+"-again", b)
	rc.WaitN(t, 2, 20*time.Second)
	reqs := rc.Requests()
	if reqs[0].Delivery != reqs[1].Delivery || reqs[0].Delivery != app.DeliveryID(env.GetEventId(), hook) {
		t.Errorf("delivery ids %s and %s, want both %s", reqs[0].Delivery, reqs[1].Delivery, app.DeliveryID(env.GetEventId(), hook))
	}
	webhooktest.Eventually(t, 10*time.Second, "one delivery, succeeded", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		return len(ds) == 1 && ds[0].Status == app.StatusSucceeded
	})
}

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

// TestLongAttemptIsKeptInProgress: an attempt that outlasts the AckWait reports
// progress, so JetStream does not hand the job to another worker meanwhile.
func TestLongAttemptIsKeptInProgress(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(int, webhooktest.Request) webhooktest.Answer {
		return webhooktest.Answer{Delay: 2500 * time.Millisecond}
	})
	hook := f.subscribe(t, rc, nil)
	f.start(t, webhooktest.Config{Timeout: 5 * time.Second, Tune: func(o *transport.Options) { o.AckWait = time.Second }})

	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	webhooktest.Eventually(t, 20*time.Second, "delivery succeeded", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		return len(ds) == 1 && ds[0].Status == app.StatusSucceeded
	})
	time.Sleep(500 * time.Millisecond)
	if n := len(rc.Requests()); n != 1 {
		t.Errorf("%d requests for one delivery whose attempt took 2.5s with a 1s AckWait, want 1", n)
	}
}

// TestShutdownRequeuesAbandonedAttempts: an attempt still running when the shutdown
// grace period ends is abandoned unrecorded, and its job goes to another instance.
func TestShutdownRequeuesAbandonedAttempts(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(nth int, _ webhooktest.Request) webhooktest.Answer {
		if nth == 1 {
			return webhooktest.Answer{Delay: 10 * time.Second}
		}
		return webhooktest.Answer{}
	})
	hook := f.subscribe(t, rc, nil)
	first := f.start(t, webhooktest.Config{Timeout: 20 * time.Second, Tune: func(o *transport.Options) {
		o.ShutdownTimeout = 300 * time.Millisecond
	}})
	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	rc.WaitN(t, 1, 20*time.Second)

	start := time.Now()
	first.Stop(t)
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("stop took %s with a 300ms grace period", el)
	}
	f.start(t, webhooktest.Config{})
	rc.WaitN(t, 2, 20*time.Second)
	webhooktest.Eventually(t, 10*time.Second, "delivered by the second instance", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		return len(ds) == 1 && ds[0].Status == app.StatusSucceeded
	})
	d := webhooktest.Deliveries(t, f.pool, hook)[0]
	if as := webhooktest.Attempts(t, f.pool, d.ID); len(as) != 1 || d.Attempts != 1 {
		t.Errorf("%d attempts logged: the abandoned one must not count", len(as))
	}
}

// TestAtLeastOnceAcrossInstances: two instances share the consumers; one stops
// mid-burst; every delivery still arrives.
func TestAtLeastOnceAcrossInstances(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(nth int, _ webhooktest.Request) webhooktest.Answer {
		return webhooktest.Answer{Delay: 20 * time.Millisecond}
	})
	hook := f.subscribe(t, rc, nil)
	a := f.start(t, webhooktest.Config{Workers: 2})
	f.start(t, webhooktest.Config{Workers: 2})

	const n = 50
	for i := range n {
		f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageFileUploaded, 0))
		if i == n/3 {
			go a.Stop(t)
		}
	}
	rc.WaitFor(t, 60*time.Second, "every delivery", func(reqs []webhooktest.Request) bool {
		return len(distinct(reqs)) >= n
	})
	webhooktest.Eventually(t, 10*time.Second, "all succeeded", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		for _, d := range ds {
			if d.Status != app.StatusSucceeded {
				return false
			}
		}
		return len(ds) == n
	})
}

func distinct(reqs []webhooktest.Request) map[string]bool {
	m := map[string]bool{}
	for _, r := range reqs {
		if r.ServiceSignatureOK {
			m[r.Delivery] = true
		}
	}
	return m
}

func eventsOf(reqs []webhooktest.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.Event
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func metric(t *testing.T, reg *prometheus.Registry, name string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return nil
}

func counter(t *testing.T, reg *prometheus.Registry, name, outcome string) float64 {
	t.Helper()
	for _, m := range metric(t, reg, name) {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" && l.GetValue() == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return metric(t, reg, name)[0].GetGauge().GetValue()
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	return metric(t, reg, name)[0].GetHistogram().GetSampleCount()
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

// TestTakesOverFromTheFanoutOfAnEarlierVersion: a dispatcher started where an earlier
// version ran (a fan-out consumer of the events with its acknowledged floor, a job
// consumer per subscription on the jobs stream, a job queued) delivers the queued job,
// then the events after the fan-out's floor, each once, and deletes the earlier
// version's consumers.
func TestTakesOverFromTheFanoutOfAnEarlierVersion(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	hook := f.subscribe(t, rc, nil)
	ctx := t.Context()
	opts := f.streams.Options

	fannedOut := webhooktest.Envelope(events.TypePackageCreated, 0)
	f.streams.Publish(t, f.js, fannedOut)
	fanout, err := f.js.CreateConsumer(ctx, opts.EventsStream, jetstream.ConsumerConfig{
		Durable: transport.FanoutConsumer, FilterSubject: opts.EventsFilter, AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := fanout.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The earlier fan-out queued the event's job on the subscription's job subject,
	// for its job consumer there.
	jobSubject := opts.JobSubjectPrefix + strconv.FormatInt(hook, 10)
	if _, err := f.js.CreateConsumer(ctx, opts.JobsStream, jetstream.ConsumerConfig{
		Durable: opts.HookConsumer(hook), FilterSubject: jobSubject, AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	typ, body, err := app.RenderBody(fannedOut)
	if err != nil {
		t.Fatal(err)
	}
	id := app.DeliveryID(fannedOut.GetEventId(), hook)
	msg, err := events.WebhookJobMessage(&eventsv1.WebhookJob{
		DeliveryId: id, HookId: hook, Event: typ, Body: body, EventId: fannedOut.GetEventId(), CreatedAtUnixMs: time.Now().UnixMilli(),
	}, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.js.Publish(ctx, jobSubject, msg.Data, jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
	notYet := webhooktest.Envelope(events.TypePackageFinalized, 0)
	f.streams.Publish(t, f.js, notYet)

	f.start(t, webhooktest.Config{})
	rc.WaitN(t, 2, 20*time.Second)
	webhooktest.Eventually(t, 10*time.Second, "the earlier version's consumers deleted", func() bool {
		_, err1 := f.js.Consumer(ctx, opts.EventsStream, transport.FanoutConsumer)
		_, err2 := f.js.Consumer(ctx, opts.JobsStream, opts.HookConsumer(hook))
		return errors.Is(err1, jetstream.ErrConsumerNotFound) && errors.Is(err2, jetstream.ErrConsumerNotFound)
	})
	webhooktest.Eventually(t, 10*time.Second, "two deliveries succeeded", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		return len(ds) == 2 && ds[0].Status == app.StatusSucceeded && ds[1].Status == app.StatusSucceeded
	})
	time.Sleep(time.Second)
	got := map[string]int{}
	for _, r := range rc.Requests() {
		got[r.Event]++
	}
	if len(rc.Requests()) != 2 || got[events.TypePackageCreated] != 1 || got[events.TypePackageFinalized] != 1 {
		t.Errorf("requests by event: %v; want the queued job's and the later event's, once each", got)
	}
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

// TestRecreatedConsumerSendsNoDeliveryAgain: a subscription's consumer created again
// (deleted by hand, a stream restored) starts at the subscription's creation, so the
// events it delivered come back; one stored longer ago than FreshFor has its row read
// first, and a delivery that succeeded is not sent again.
func TestRecreatedConsumerSendsNoDeliveryAgain(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	hook := f.subscribe(t, rc, nil)
	first := f.start(t, webhooktest.Config{})
	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
	rc.WaitN(t, 1, 20*time.Second)
	webhooktest.Eventually(t, 10*time.Second, "the delivery succeeded", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		return len(ds) == 1 && ds[0].Status == app.StatusSucceeded
	})
	first.Stop(t)
	if err := f.js.DeleteConsumer(t.Context(), f.streams.Options.EventsStream, f.streams.Options.HookConsumer(hook)); err != nil {
		t.Fatal(err)
	}

	time.Sleep(50 * time.Millisecond) // the first event is older than FreshFor below
	f.start(t, webhooktest.Config{Tune: func(o *transport.Options) { o.FreshFor = 10 * time.Millisecond }})
	f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageFinalized, 0))
	rc.WaitN(t, 2, 20*time.Second)
	time.Sleep(time.Second)
	if reqs := rc.Requests(); len(reqs) != 2 || reqs[1].Event != events.TypePackageFinalized {
		t.Errorf("requests %v; want the first event once, then the new one", eventsOf(reqs))
	}
}
