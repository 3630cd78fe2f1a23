package policies

import (
	"context"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// EffectsWriter writes effects (events through the outbox) in a transaction of their
// own: the store's WriteEffects.
type EffectsWriter interface {
	WriteEffects(ctx context.Context, fx app.Effects) error
}

// OutboxNotifier is the Notifier that writes quota.exceeded to the outbox, for the
// webhooks that chose it.
type OutboxNotifier struct{ W EffectsWriter }

var _ Notifier = OutboxNotifier{}

// QuotaExceeded writes the quota.exceeded event of a refused upload.
func (n OutboxNotifier) QuotaExceeded(ctx context.Context, userID int64, limit string, used, quota, need int64) error {
	return n.W.WriteEffects(ctx, app.Effects{Events: []*eventsv1.Envelope{quotaExceeded(userID, limit, used, quota, need, time.Now())}})
}

// quotaExceeded is the quota.exceeded event.
func quotaExceeded(userID int64, limit string, used, quota, need int64, at time.Time) *eventsv1.Envelope {
	e := events.NewEnvelope(events.TypeQuotaExceeded, at.UTC())
	e.Data = &eventsv1.Envelope_QuotaExceeded{QuotaExceeded: &eventsv1.QuotaExceeded{
		UserId: userID, Limit: limit, UsedBytes: used, QuotaBytes: quota, NeededBytes: need,
	}}
	return e
}
