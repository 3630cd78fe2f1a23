package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/msgerr"
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
//
// Every subscription that takes an event is handed its own copy of the message, about
// at once; the event is decoded and its body rendered for the first of them, and the
// others find it in a small cache keyed by the message's stream sequence (and checked
// against its bytes).
type EventJobs struct {
	subs *Subscriptions
	log  *slog.Logger

	mu    sync.Mutex
	cache [eventCacheSize]renderedEvent
}

// eventCacheSize is how many rendered events the cache holds (the latest, by stream
// sequence modulo the size): more than the messages in flight at once in an instance.
const eventCacheSize = 1024

// renderedEvent is what every delivery of one event shares: read-only once cached.
type renderedEvent struct {
	seq        uint64 // the event message's stream sequence; 0: empty
	raw        []byte // the message's data (a stream recreated since numbers anew)
	eventID    string
	typ        string
	body       []byte
	occurredAt time.Time
	testHook   int64 // the subscription of a webhook.test
	// packageID and packageSeq: the event's package and its number among the
	// package's events (Envelope.package_seq); empty and 0 when it has none.
	packageID  string
	packageSeq uint64
}

// NewEventJobs returns an EventJobs reading subscriptions from subs.
func NewEventJobs(subs *Subscriptions, log *slog.Logger) *EventJobs {
	return &EventJobs{subs: subs, log: log}
}

// Job returns the delivery job of the event message data (an encoded
// eventsv1.Envelope, stored at published under stream sequence seq; 0 when unknown) for
// subscription hookID; nil when the event does not go to it: a type it does not select
// (its consumer's filter was being changed), an event from before it was created or
// while it is disabled, the test of another subscription, or a subscription that is
// gone. Such a message is acknowledged with nothing delivered. A msgerr.Poison: the
// message can never be handled; another error is transient.
//
// The job carries what the delivery's row needs (event, body, event id, creation time),
// so its first attempt reads nothing; its delivery id is DeliveryID(event id, hook id),
// the same however often the event is handed out.
func (f *EventJobs) Job(ctx context.Context, data []byte, hookID int64, published time.Time, seq uint64) (*eventsv1.WebhookJob, error) {
	ev, err := f.render(data, seq)
	if err != nil {
		return nil, err
	}
	if ev.typ == events.TypeWebhookTest && ev.testHook != hookID {
		return nil, nil // the Test button of another subscription
	}
	sub, err := f.subs.Get(ctx, hookID)
	switch {
	case errors.Is(err, ErrNotFound):
		f.log.Info("subscription gone; no delivery", "event_id", ev.eventID, "event", ev.typ, "hook_id", hookID)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("event %s for subscription %d: %w", ev.eventID, hookID, err)
	case ev.typ != events.TypeWebhookTest && !sub.Selects(ev.typ, ev.occurredAt):
		// (A test goes to its one subscription, whatever it selects or its state.)
		return nil, nil
	}
	return &eventsv1.WebhookJob{
		DeliveryId: DeliveryID(ev.eventID, hookID), HookId: hookID, Event: ev.typ, Body: ev.body,
		EventId: ev.eventID, CreatedAtUnixMs: published.UnixMilli(),
		PackageId: ev.packageID, PackageSeq: ev.packageSeq,
	}, nil
}

// Position returns the package of the event message data (as Job takes it) and the
// event's number among the package's events; "" and 0 when it has none.
func (f *EventJobs) Position(data []byte, seq uint64) (pkg string, pkgSeq uint64, err error) {
	ev, err := f.render(data, seq)
	if err != nil {
		return "", 0, err
	}
	return ev.packageID, ev.packageSeq, nil
}

// render decodes the event message data and renders its body, or finds it in the cache
// under seq.
func (f *EventJobs) render(data []byte, seq uint64) (renderedEvent, error) {
	slot := &f.cache[seq%eventCacheSize]
	if seq != 0 {
		f.mu.Lock()
		ev := *slot
		f.mu.Unlock()
		if ev.seq == seq && bytes.Equal(ev.raw, data) {
			return ev, nil
		}
	}
	env, err := events.UnmarshalEnvelope(data)
	if err != nil {
		return renderedEvent{}, msgerr.Poison(err)
	}
	typ, body, err := RenderBody(env)
	if err != nil {
		return renderedEvent{}, err
	}
	ev := renderedEvent{
		seq: seq, raw: data, eventID: env.GetEventId(), typ: typ, body: body,
		occurredAt: env.GetOccurredAt().AsTime(), testHook: env.GetWebhookTest().GetHookId(),
		packageSeq: env.GetPackageSeq(),
	}
	if ev.packageSeq > 0 {
		ev.packageID = packageOf(env)
	}
	if seq != 0 {
		f.mu.Lock()
		*slot = ev
		f.mu.Unlock()
	}
	return ev, nil
}

// packageOf returns the package_id of the Package that env's data carries (its field
// "package"), "" when it has none.
func packageOf(env *eventsv1.Envelope) string {
	m := env.ProtoReflect()
	od := m.Descriptor().Oneofs().ByName("data")
	if od == nil {
		return ""
	}
	fd := m.WhichOneof(od)
	if fd == nil || fd.Message() == nil {
		return ""
	}
	data := m.Get(fd).Message()
	pf := data.Descriptor().Fields().ByName("package")
	if pf == nil || pf.Message() == nil || pf.Message().FullName() != packageMessage {
		return ""
	}
	return data.Get(pf).Message().Interface().(*eventsv1.Package).GetPackageId()
}
