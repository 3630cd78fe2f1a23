package transport_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/transport"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

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
