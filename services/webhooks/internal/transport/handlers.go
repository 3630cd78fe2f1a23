package transport

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/msgerr"
	"github.com/shipfile/shipfile/pkg/tracing"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// handleMsg handles one message of a subscription's delivery consumer: an event (its
// delivery's first attempt, made by EventJobs) or a due job (a retry or a redelivery),
// reporting progress while the attempt runs long. It turns what the delivery returned
// into the message's fate: done (nil) or nothing to deliver → Ack, poison → Term, a
// retry → Nak at once or, after a delay, a job on the retry subject (the message is
// acknowledged), so that while it waits it holds no slot of its subscription's
// max_in_flight.
func (d *Dispatcher) handleMsg(ctx context.Context, msg jetstream.Msg) consumer.Decision {
	hm, ok := msg.(hookMsg)
	if !ok {
		return consumer.Poison("not a delivery consumer's message")
	}
	ack := ackInfoOf(msg)
	var job *eventsv1.WebhookJob
	var err error
	seenBefore := false
	if strings.HasPrefix(msg.Subject(), d.opts.DueSubjectPrefix) {
		job, err = events.UnmarshalWebhookJob(msg.Data())
		if err != nil {
			return consumer.Poison(err.Error())
		}
		if job.GetHookId() != hm.hook {
			return consumer.Poison(fmt.Sprintf("a job of subscription %d on the due subject of %d", job.GetHookId(), hm.hook))
		}
	} else {
		job, err = d.p.Events.Job(ctx, msg.Data(), hm.hook, ack.stored, ack.streamSeq)
		switch {
		case msgerr.IsPoison(err):
			return consumer.Poison(err.Error())
		case err != nil:
			return consumer.Failed(err) // after the back-off
		case job == nil:
			return d.passOver(ctx, msg, hm.hook, ack.streamSeq) // not for this subscription
		}
		seenBefore = time.Since(ack.stored) > d.opts.FreshFor
	}
	err = d.p.Deliverer.DeliverJob(ctx, job, ack.delivered, seenBefore)
	delay, _, again := msgerr.Delay(err)
	switch {
	case err == nil:
		return consumer.Acked()
	case msgerr.IsPoison(err):
		return consumer.Poison(err.Error())
	case !again:
		return consumer.Failed(err) // not a delivery's error: after the back-off
	case delay <= 0:
		return consumer.NakAfter(0)
	}
	if err := d.scheduleRetry(ctx, job, ack.streamSeq, time.Now().Add(delay)); err != nil {
		d.log.Warn("move webhook job to the retry queue; it waits on its own consumer", "delivery_id", job.GetDeliveryId(), "err", err)
		return consumer.NakAfter(delay)
	}
	return consumer.Acked()
}

// scheduleRetry publishes job on the retry subject, due at notBefore. Its Nats-Msg-Id
// is derived from the stream sequence of the message that carried it, so a message
// handled again after a crash before its ack yields no second retry.
func (d *Dispatcher) scheduleRetry(ctx context.Context, job *eventsv1.WebhookJob, seq uint64, notBefore time.Time) error {
	out := nats.NewMsg(d.opts.RetrySubjectPrefix + strconv.FormatInt(job.GetHookId(), 10))
	// The retry carries the ids only (not the event and body): its attempt reads the
	// row, whose round and state the first attempt changed.
	var err error
	if out.Data, err = proto.Marshal(&eventsv1.WebhookJob{DeliveryId: job.GetDeliveryId(), HookId: job.GetHookId()}); err != nil {
		return err
	}
	out.Header.Set(HeaderNotBefore, strconv.FormatInt(notBefore.UnixMilli(), 10))
	out.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s:retry:%d", job.GetDeliveryId(), seq))
	// The retry stays in the delivery's trace: its attempts are spans of the same trace
	// and send the receiver the same trace id.
	tracing.Inject(ctx, tracing.Headers(out.Header))
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err = d.js.PublishMsg(pctx, out)
	return err
}

// handleRetry holds a waiting job until it is due (NakWithDelay), then publishes it on
// its subscription's due subject and acknowledges it. A queued job (a redelivery) has
// no wait: it is due at once.
func (d *Dispatcher) handleRetry(ctx context.Context, msg jetstream.Msg) consumer.Decision {
	if nb := msg.Headers().Get(HeaderNotBefore); nb != "" {
		ms, _ := strconv.ParseInt(nb, 10, 64)
		if wait := time.Until(time.UnixMilli(ms)); wait > 0 {
			return consumer.NakAfter(wait)
		}
	}
	job, err := events.UnmarshalWebhookJob(msg.Data())
	if err != nil {
		return consumer.Poison(err.Error())
	}
	if job.GetHookId() <= 0 || job.GetDeliveryId() == "" {
		return consumer.Poison("a webhook job without delivery id or hook id")
	}
	if _, err := d.p.Subscriptions.Get(ctx, job.GetHookId()); errors.Is(err, app.ErrNotFound) {
		return consumer.Acked() // its subscription is gone
	}
	md, err := msg.Metadata()
	if err != nil {
		return consumer.NakAfter(0)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	due := nats.NewMsg(d.opts.DueSubject(job.GetHookId()))
	due.Data = msg.Data()
	tracing.Inject(ctx, tracing.Headers(due.Header))
	_, err = d.js.PublishMsg(pctx, due, jetstream.WithMsgID(fmt.Sprintf("%s:due:%d", job.GetDeliveryId(), md.Sequence.Stream)))
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("move webhook job to its due subject", "delivery_id", job.GetDeliveryId(), "err", err)
		}
		return consumer.NakAfter(time.Second)
	}
	return consumer.Acked()
}
