package transport_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/signing"
	"github.com/shipfile/shipfile/services/webhooks/internal/transport"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

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
