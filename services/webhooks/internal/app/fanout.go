package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// DeliveryNamespace is the UUIDv5 namespace of delivery ids. Never change it: a delivery
// id is derived from it, the event id and the hook id, so every fan-out of one event to
// one subscription (a redelivered event, a second dispatcher) yields the same id.
var DeliveryNamespace = uuid.MustParse("6f1d8b52-3c7e-4b4a-9d0e-5a2f7c91e3b8")

// DeliveryID returns the id of the delivery of event eventID to subscription hookID:
// UUIDv5(DeliveryNamespace, eventID + ":" + hookID).
func DeliveryID(eventID string, hookID int64) string {
	return uuid.NewSHA1(DeliveryNamespace, []byte(eventID+":"+strconv.FormatInt(hookID, 10))).String()
}

// Job is a delivery job to queue: the message and its Nats-Msg-Id (the delivery id).
type Job struct {
	Job   *eventsv1.WebhookJob
	MsgID string
}

// JobPublisher queues delivery jobs.
type JobPublisher interface {
	// PublishJobs publishes the jobs at once, each with its MsgID as Nats-Msg-Id, and
	// returns once the stream has acknowledged every one (an error if any failed).
	PublishJobs(ctx context.Context, jobs []Job) error
}

// Fanout turns each package event into one delivery job per subscription. It writes
// nothing to the database: a delivery's row is written with its first attempt.
type Fanout struct {
	subs *Subscriptions
	jobs JobPublisher
	log  *slog.Logger
	now  func() time.Time
}

// NewFanout returns a Fanout matching events to subs and queueing on jobs.
func NewFanout(subs *Subscriptions, jobs JobPublisher, log *slog.Logger) *Fanout {
	return &Fanout{subs: subs, jobs: jobs, log: log, now: time.Now}
}

// Handle fans out one event message; see HandleBatch.
func (f *Fanout) Handle(ctx context.Context, data []byte) error {
	return f.HandleBatch(ctx, [][]byte{data})[0]
}

// HandleBatch fans out event messages (encoded eventsv1.Envelopes) together: their
// jobs, each carrying its delivery's event, body, event id and creation time, published
// asynchronously, waiting for every acknowledgement. It returns one error per message:
// nil once all of that message's jobs are queued (it may be acknowledged), an error
// wrapping ErrPoison for a message that can never be handled, another error for a
// transient failure. An event handled again after a crash yields the same delivery ids
// (DeliveryID), and their jobs are dropped by the stream's duplicate window. (A job
// published again after the window is handed out as fresh: the delivery may be
// attempted once more, with the same delivery id, which at-least-once delivery allows.)
func (f *Fanout) HandleBatch(ctx context.Context, msgs [][]byte) []error {
	errs := make([]error, len(msgs))
	var jobs []Job
	created := f.now().UnixMilli()
	if err := f.subs.CatchUp(ctx); err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("fan-out: subscriptions: %w", err)
		}
		return errs
	}
	for i, data := range msgs {
		env, err := events.UnmarshalEnvelope(data)
		if err != nil {
			errs[i] = fmt.Errorf("%w: %w", ErrPoison, err)
			continue
		}
		typ, body, err := RenderBody(env)
		if err != nil {
			errs[i] = err
			continue
		}
		var targets []Subscription
		if typ == events.TypeWebhookTest {
			// The Test button: that one subscription, whatever its selection or state.
			s, err := f.subs.Get(ctx, env.GetWebhookTest().GetHookId())
			switch {
			case errors.Is(err, ErrNotFound):
				f.log.Info("subscription gone; no delivery", "event_id", env.GetEventId(), "event", typ, "hook_id", env.GetWebhookTest().GetHookId())
			case err != nil:
				errs[i] = fmt.Errorf("fan-out %s: %w", env.GetEventId(), err)
				continue
			default:
				targets = []Subscription{s}
			}
		} else {
			targets = f.subs.Matching(typ, env.GetOccurredAt().AsTime())
		}
		for _, s := range targets {
			id := DeliveryID(env.GetEventId(), s.ID)
			// The job carries what the row needs: its first attempt reads nothing and
			// writes the row with the attempt.
			jobs = append(jobs, Job{Job: &eventsv1.WebhookJob{
				DeliveryId: id, HookId: s.ID, Event: typ, Body: body, EventId: env.GetEventId(), CreatedAtUnixMs: created,
			}, MsgID: id})
		}
		f.log.Debug("fanning out", "event_id", env.GetEventId(), "event", typ, "deliveries", len(targets))
	}
	fail := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	if err := f.jobs.PublishJobs(ctx, jobs); err != nil {
		return fail(fmt.Errorf("fan-out of %d events: queue %d deliveries: %w", len(msgs), len(jobs), err))
	}
	return errs
}
