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

// FanoutStore is what the fan-out needs of the database.
type FanoutStore interface {
	// ActiveSubscriptionIDs returns the active subscriptions that selected eventType
	// and existed when the event occurred.
	ActiveSubscriptionIDs(ctx context.Context, eventType string, occurredAt time.Time) ([]int64, error)
	// InsertDelivery inserts d unless a delivery of that event to that subscription
	// exists; ErrNotFound when the subscription does not exist.
	InsertDelivery(ctx context.Context, d NewDelivery) error
}

// JobPublisher queues delivery jobs.
type JobPublisher interface {
	// PublishJob publishes job with msgID as Nats-Msg-Id and waits for the stream's ack.
	PublishJob(ctx context.Context, job *eventsv1.WebhookJob, msgID string) error
}

// Fanout turns each package event into one delivery (row and job) per subscription.
type Fanout struct {
	store FanoutStore
	jobs  JobPublisher
	log   *slog.Logger
}

// NewFanout returns a Fanout writing to store and queueing on jobs.
func NewFanout(store FanoutStore, jobs JobPublisher, log *slog.Logger) *Fanout {
	return &Fanout{store: store, jobs: jobs, log: log}
}

// Handle fans out one event message (an encoded eventsv1.Envelope). Every step is
// idempotent, so an event handled again after a crash yields the same deliveries, and
// their jobs are dropped by the stream's duplicate window or acknowledged as done by
// the workers. An error wrapping ErrPoison means the message can never be handled;
// any other error is transient.
func (f *Fanout) Handle(ctx context.Context, data []byte) error {
	env, err := events.UnmarshalEnvelope(data)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPoison, err)
	}
	typ, body, err := RenderBody(env)
	if err != nil {
		return err
	}
	var targets []int64
	if typ == events.TypeWebhookTest {
		// The Test button: that one subscription, whatever its selection or state.
		targets = []int64{env.GetWebhookTest().GetHookId()}
	} else if targets, err = f.store.ActiveSubscriptionIDs(ctx, typ, env.GetOccurredAt().AsTime()); err != nil {
		return fmt.Errorf("fan-out %s: %w", env.GetEventId(), err)
	}
	for _, hookID := range targets {
		id := DeliveryID(env.GetEventId(), hookID)
		err := f.store.InsertDelivery(ctx, NewDelivery{
			ID:             id,
			SubscriptionID: hookID,
			EventID:        env.GetEventId(),
			Event:          typ,
			Body:           body,
		})
		if errors.Is(err, ErrNotFound) {
			f.log.Info("subscription gone; no delivery", "event_id", env.GetEventId(), "event", typ, "hook_id", hookID)
			continue
		}
		if err != nil {
			return fmt.Errorf("fan-out %s to hook %d: %w", env.GetEventId(), hookID, err)
		}
		if err := f.jobs.PublishJob(ctx, &eventsv1.WebhookJob{DeliveryId: id, HookId: hookID}, id); err != nil {
			return fmt.Errorf("fan-out %s to hook %d: queue delivery %s: %w", env.GetEventId(), hookID, id, err)
		}
	}
	f.log.Debug("fanned out", "event_id", env.GetEventId(), "event", typ, "deliveries", len(targets))
	return nil
}
