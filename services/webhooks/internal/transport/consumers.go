package transport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// EnsureConsumers creates the durable retry, queued and journal consumers, or updates them to
// the current configuration, after deleting the consumers of earlier versions whose
// filters overlap theirs on the work-queue stream (the shared delivery consumer, and
// the per-subscription job consumers before the one hop: their queued jobs stay on the
// stream and the queued consumer moves them). Every instance calls it at start; they
// share the consumers. Requests a NATS cluster drops or refuses for a while are retried
// (events.EnsureConsumer).
func (d *Dispatcher) EnsureConsumers(ctx context.Context) (retry, queued, journal jetstream.Consumer, err error) {
	old := []string{d.opts.DeliverConsumer}
	if stream, err := d.js.Stream(ctx, d.opts.JobsStream); err == nil {
		names := stream.ConsumerNames(ctx)
		for name := range names.Name() {
			if _, ok := d.hookOf(name); ok {
				old = append(old, name)
			}
		}
		if err := names.Err(); err != nil {
			return nil, nil, nil, fmt.Errorf("list the consumers of %s: %w", d.opts.JobsStream, err)
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil, nil, fmt.Errorf("stream %s: %w", d.opts.JobsStream, err)
	}
	for _, name := range old {
		if err := d.js.DeleteConsumer(ctx, d.opts.JobsStream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, nil, nil, fmt.Errorf("delete the job consumer %s of an earlier version: %w", name, err)
		}
	}
	// Both move jobs on to a due subject, held in the consumer while they wait: no
	// attempt runs on them, so they hold no slot of any subscription's max_in_flight.
	jobConsumer := func(name, description, filter string, maxAckPending int) (jetstream.Consumer, error) {
		return events.EnsureConsumer(ctx, d.js, d.opts.JobsStream, jetstream.ConsumerConfig{
			Durable: name, Description: description, FilterSubject: filter,
			DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 30 * time.Second, MaxDeliver: -1, MaxAckPending: maxAckPending,
		})
	}
	if retry, err = jobConsumer(d.opts.RetryConsumer, "webhook dispatcher: holds delivery jobs until their next attempt",
		d.opts.RetrySubjectPrefix+">", d.opts.MaxAckPending); err != nil {
		return nil, nil, nil, err
	}
	if queued, err = jobConsumer(d.opts.QueuedConsumer, "webhook dispatcher: moves redeliveries to their subscription's due jobs",
		d.opts.JobSubjectPrefix+"*", 1000); err != nil {
		return nil, nil, nil, err
	}
	if journal, err = jobConsumer(d.opts.JournalConsumer, "webhook dispatcher: writes the attempt journal into the delivery log",
		d.opts.JournalSubject(), 4*journalFetch); err != nil {
		return nil, nil, nil, err
	}
	return retry, queued, journal, nil
}

// hookOf returns the subscription id of the delivery consumer named name.
func (d *Dispatcher) hookOf(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, d.opts.DeliverConsumer+"-")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	return id, err == nil && id > 0
}

// readLegacyFloor notes where the fan-out consumer of the versions before the one hop
// had got to, if it is still there.
func (d *Dispatcher) readLegacyFloor(ctx context.Context) error {
	c, err := d.js.Consumer(ctx, d.opts.EventsStream, d.opts.FanoutConsumer)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("the fan-out consumer of an earlier version: %w", err)
	}
	floor := c.CachedInfo().AckFloor.Stream
	d.legacyFloor = &floor
	d.log.Info("the fan-out consumer of an earlier version is still there; the subscriptions' consumers start after its acknowledged events",
		"consumer", d.opts.FanoutConsumer, "after_stream_seq", floor)
	return nil
}

// reconcile pulls from the delivery consumer of every subscription, creating it or
// updating its filter and its MaxAckPending (max_in_flight) to the subscription's, and
// removes the consumers and queued jobs of subscriptions that are gone (first: those
// left over while no instance ran). Once every subscription has its consumer, the
// fan-out consumer of an earlier version is deleted.
func (d *Dispatcher) reconcile(ctx, workCtx context.Context, hooks map[int64]*hookConsumer, first bool) {
	present := map[int64]bool{}
	complete := true
	for _, s := range d.p.Subscriptions.All() {
		present[s.ID] = true
		h := hooks[s.ID]
		filters := d.opts.HookFilters(s)
		if h != nil && h.maxInFlight == s.MaxInFlight && slices.Equal(h.filters, filters) {
			continue
		}
		cons, err := d.ensureHookConsumer(ctx, s, filters)
		if err != nil {
			complete = false
			if ctx.Err() == nil {
				d.log.Warn("delivery consumer", "hook_id", s.ID, "err", err)
			}
			continue
		}
		if h != nil {
			h.setCap(s.MaxInFlight, d.opts.Workers)
			h.filters = filters
			continue
		}
		h = d.newHookConsumer(s, filters)
		cc, err := cons.Consume(func(msg jetstream.Msg) { d.dispatch(ctx, workCtx, h, msg) },
			jetstream.PullMaxMessages(max(1, min(s.MaxInFlight, d.opts.Workers))),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrNoHeartbeat) {
					d.log.Debug("delivery consumer", "hook_id", s.ID, "err", err)
				}
			}))
		if err != nil {
			complete = false
			d.log.Warn("pull delivery consumer", "hook_id", s.ID, "err", err)
			continue
		}
		h.cc = cc
		hooks[s.ID] = h
	}
	for id, h := range hooks {
		if !present[id] {
			h.cc.Stop()
			close(h.stop)
			delete(hooks, id)
			d.removeHook(ctx, id)
		}
	}
	if complete && d.legacyFloor != nil {
		err := d.js.DeleteConsumer(ctx, d.opts.EventsStream, d.opts.FanoutConsumer)
		if err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) {
			d.log.Info("every subscription has its consumer of the events; the fan-out consumer of an earlier version is deleted", "consumer", d.opts.FanoutConsumer)
			d.legacyFloor = nil
		} else if ctx.Err() == nil {
			d.log.Warn("delete the fan-out consumer of an earlier version", "err", err)
		}
	}
	if !first {
		return
	}
	stream, err := d.js.Stream(ctx, d.opts.EventsStream)
	if err != nil {
		return
	}
	names := stream.ConsumerNames(ctx)
	for name := range names.Name() {
		if id, ok := d.hookOf(name); ok && !present[id] {
			if _, err := d.p.Subscriptions.Get(ctx, id); errors.Is(err, app.ErrNotFound) {
				d.removeHook(ctx, id)
			}
		}
	}
}

// ensureHookConsumer creates the delivery consumer of subscription s, or updates its
// filter and MaxAckPending. A new one starts with the events stored a minute before
// the subscription was created (older ones do not reach it: Subscription.Selects), or
// after the last event the fan-out consumer of an earlier version acknowledged.
func (d *Dispatcher) ensureHookConsumer(ctx context.Context, s app.Subscription, filters []string) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{
		Durable:        d.opts.HookConsumer(s.ID),
		Description:    "webhook dispatcher: delivers the events and due jobs of subscription " + strconv.FormatInt(s.ID, 10),
		FilterSubjects: filters,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        d.opts.AckWait,
		MaxDeliver:     -1,
		// max_in_flight across every instance: the server hands out no more messages
		// while that many are unacknowledged; a killed instance's come back after AckWait.
		MaxAckPending: max(1, s.MaxInFlight),
	}
	c, err := d.js.Consumer(ctx, d.opts.EventsStream, cfg.Durable)
	switch {
	case err == nil:
		// Where it starts is fixed once it exists.
		old := c.CachedInfo().Config
		cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = old.DeliverPolicy, old.OptStartSeq, old.OptStartTime
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, err
	case d.legacyFloor != nil:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, *d.legacyFloor+1
	default:
		start := s.CreatedAt.Add(-time.Minute)
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	return events.EnsureConsumer(ctx, d.js, d.opts.EventsStream, cfg)
}

// removeHook deletes a deleted subscription's delivery consumer and its queued jobs.
func (d *Dispatcher) removeHook(ctx context.Context, id int64) {
	if err := d.js.DeleteConsumer(ctx, d.opts.EventsStream, d.opts.HookConsumer(id)); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		d.log.Warn("delete delivery consumer", "hook_id", id, "err", err)
	}
	purge := func(stream, subject string) {
		s, err := d.js.Stream(ctx, stream)
		if err == nil {
			err = s.Purge(ctx, jetstream.WithPurgeSubject(subject))
		}
		if err != nil && ctx.Err() == nil {
			d.log.Warn("purge jobs of a deleted subscription", "hook_id", id, "subject", subject, "err", err)
		}
	}
	purge(d.opts.EventsStream, d.opts.DueSubject(id))
	purge(d.opts.JobsStream, d.opts.JobSubjectPrefix+strconv.FormatInt(id, 10))
	d.log.Info("subscription deleted; its delivery consumer and jobs removed", "hook_id", id)
}
