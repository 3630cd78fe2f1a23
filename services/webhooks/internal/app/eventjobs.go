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
// id is derived from it, the event id and the hook id, so every hand-out of one event to
// one subscription (a redelivered event, another instance, the fan-out of the versions
// before the one hop) yields the same id.
var DeliveryNamespace = uuid.MustParse("6f1d8b52-3c7e-4b4a-9d0e-5a2f7c91e3b8")

// DeliveryID returns the id of the delivery of event eventID to subscription hookID:
// UUIDv5(DeliveryNamespace, eventID + ":" + hookID).
func DeliveryID(eventID string, hookID int64) string {
	return uuid.NewSHA1(DeliveryNamespace, []byte(eventID+":"+strconv.FormatInt(hookID, 10))).String()
}

// EventJobs makes delivery jobs of the package events a subscription's consumer hands
// out: each event goes straight to its delivery's first attempt (no job is queued in
// between). It writes nothing: a delivery's row is written with its first attempt.
type EventJobs struct {
	subs *Subscriptions
	log  *slog.Logger
}

// NewEventJobs returns an EventJobs reading subscriptions from subs.
func NewEventJobs(subs *Subscriptions, log *slog.Logger) *EventJobs {
	return &EventJobs{subs: subs, log: log}
}

// Job returns the delivery job of the event message data (an encoded
// eventsv1.Envelope) for subscription hookID, the message having been stored at
// published; nil when the event does not go to it: a type it does not select (its
// consumer's filter was being changed), an event from before it was created or while it
// is disabled, the test of another subscription, or a subscription that is gone. Such a
// message is acknowledged with nothing delivered. An error wrapping ErrPoison: the message
// can never be handled; another error is transient.
//
// The job carries what the delivery's row needs (event, body, event id, creation time),
// so its first attempt reads nothing; its delivery id is DeliveryID(event id, hook id),
// the same however often the event is handed out.
func (f *EventJobs) Job(ctx context.Context, data []byte, hookID int64, published time.Time) (*eventsv1.WebhookJob, error) {
	env, err := events.UnmarshalEnvelope(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPoison, err)
	}
	typ := env.GetType()
	if typ == events.TypeWebhookTest {
		// The Test button: that one subscription, whatever its selection or state.
		if env.GetWebhookTest().GetHookId() != hookID {
			return nil, nil
		}
	}
	sub, err := f.subs.Get(ctx, hookID)
	switch {
	case errors.Is(err, ErrNotFound):
		f.log.Info("subscription gone; no delivery", "event_id", env.GetEventId(), "event", typ, "hook_id", hookID)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("event %s for subscription %d: %w", env.GetEventId(), hookID, err)
	case typ != events.TypeWebhookTest && !sub.Selects(typ, env.GetOccurredAt().AsTime()):
		return nil, nil
	}
	typ, body, err := RenderBody(env)
	if err != nil {
		return nil, err
	}
	return &eventsv1.WebhookJob{
		DeliveryId: DeliveryID(env.GetEventId(), hookID), HookId: hookID, Event: typ, Body: body,
		EventId: env.GetEventId(), CreatedAtUnixMs: published.UnixMilli(),
	}, nil
}
