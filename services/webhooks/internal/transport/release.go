package transport

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// Releaser hands the released deliveries of ordered subscriptions to their
// subscription's delivery consumer: a due job with the ids only, whose attempt reads
// the delivery's row.
type Releaser struct {
	js   jetstream.JetStream
	opts Options
}

var _ app.Releaser = (*Releaser)(nil)

// NewReleaser returns a Releaser publishing on the due subjects of opts (defaults
// filled in).
func NewReleaser(js jetstream.JetStream, opts Options) *Releaser {
	opts.defaults()
	return &Releaser{js: js, opts: opts}
}

// Release publishes r's due job. Each release is a message of its own (its
// Nats-Msg-Id names the moment): a delivery is released again only when it went
// unattempted for a while.
func (r *Releaser) Release(ctx context.Context, rel app.Release) error {
	data, err := proto.Marshal(&eventsv1.WebhookJob{DeliveryId: rel.DeliveryID, HookId: rel.SubscriptionID})
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err = r.js.Publish(pctx, r.opts.DueSubject(rel.SubscriptionID), data,
		jetstream.WithMsgID(fmt.Sprintf("%s:release:%d", rel.DeliveryID, time.Now().UnixNano())))
	return err
}

// passOver acknowledges an event that does not go to subscription hook; on an ordered
// subscription a package's event is first passed over in its package's order, so that
// the package's later events do not wait for it.
func (d *Dispatcher) passOver(ctx context.Context, msg jetstream.Msg, hook int64, streamSeq uint64) consumer.Decision {
	if d.p.Order == nil {
		return consumer.Acked()
	}
	sub, err := d.p.Subscriptions.Get(ctx, hook)
	if err != nil || !sub.Ordered() {
		return consumer.Acked() // gone, or not ordered
	}
	pkg, seq, err := d.p.Events.Position(msg.Data(), streamSeq)
	if err != nil || seq == 0 {
		return consumer.Acked()
	}
	if err := d.p.Order.Skip(ctx, hook, pkg, seq); err != nil {
		return consumer.Failed(err) // after the back-off
	}
	return consumer.Acked()
}
