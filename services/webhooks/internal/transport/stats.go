package transport

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// refreshStats refreshes the queue gauges, and removes the queued jobs of subscriptions
// that no longer exist. The queue depth is the messages (events and due jobs) the
// subscriptions' consumers have not yet settled, with the redeliveries not yet moved;
// the oldest pending delivery is the older of the oldest pending row (a delivery
// waiting for its next attempt, or redelivered) and the oldest message a subscription's
// consumer has not settled (a delivery has no row until its first attempt is
// committed).
func (d *Dispatcher) refreshStats(ctx context.Context) {
	var depth uint64
	var oldest time.Time
	older := func(t time.Time) {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	if evs, err := d.js.Stream(ctx, d.opts.EventsStream); err == nil {
		present := map[int64]bool{}
		for _, s := range d.p.Subscriptions.All() {
			present[s.ID] = true
		}
		// Every consumer's state in one listing (paged by the server), not a request per
		// subscription from every instance.
		list := evs.ListConsumers(ctx)
		for info := range list.Info() {
			if id, ok := d.hookOf(info.Name); !ok || !present[id] {
				continue
			}
			depth += info.NumPending + uint64(info.NumAckPending)
			if info.NumPending == 0 && info.NumAckPending == 0 {
				continue
			}
			// The first message after the acknowledged floor that the consumer takes.
			for _, subject := range info.Config.FilterSubjects {
				if m, err := evs.GetMsg(ctx, info.AckFloor.Stream+1, jetstream.WithGetMsgSubject(subject)); err == nil {
					older(m.Time)
				}
			}
		}
		if err := list.Err(); err != nil && ctx.Err() == nil {
			d.log.Debug("delivery consumers' info", "err", err)
		}
	} else if ctx.Err() == nil {
		d.log.Debug("events stream", "err", err)
	}
	if stream, err := d.js.Stream(ctx, d.opts.JobsStream); err == nil {
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(d.opts.JobSubjectPrefix+"*"))
		if err == nil {
			depth += info.State.Msgs
			if info.State.Msgs > 0 {
				if m, err := stream.GetMsg(ctx, info.State.FirstSeq, jetstream.WithGetMsgSubject(d.opts.JobSubjectPrefix+"*")); err == nil {
					older(m.Time)
				}
			}
			for subj := range info.State.Subjects {
				id, err := strconv.ParseInt(strings.TrimPrefix(subj, d.opts.JobSubjectPrefix), 10, 64)
				if err != nil {
					continue
				}
				if _, err := d.p.Subscriptions.Get(ctx, id); errors.Is(err, app.ErrNotFound) {
					d.removeHook(ctx, id)
				}
			}
		} else if ctx.Err() == nil {
			d.log.Debug("jobs stream info", "err", err)
		}
	}
	d.p.Metrics.QueueDepth.Set(float64(depth))
	var oldestMsg time.Duration
	if !oldest.IsZero() {
		oldestMsg = max(0, time.Since(oldest))
	}
	if age, err := d.p.Deliverer.OldestPending(ctx); err == nil {
		d.p.Metrics.OldestPending.Set(max(age, oldestMsg).Seconds())
	} else if ctx.Err() == nil {
		d.log.Debug("oldest pending delivery", "err", err)
	}
}
