// Package transport connects the dispatcher to the outside: the JetStream consumers of
// package events and delivery jobs, the publisher of delivery jobs, and the HTTP sender
// of webhook requests with its SSRF guard.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/backoff"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// Production names of the durable consumers.
const (
	FanoutConsumer  = "webhooks-fanout"
	DeliverConsumer = "webhooks-deliver"
)

// Options name the streams, subjects and consumers the dispatcher uses and tune its
// loops. DefaultOptions has the production names; tests give each run its own.
type Options struct {
	EventsStream   string // SHIPFILE_EVENTS
	EventsFilter   string // shipfile.events.>
	FanoutConsumer string // webhooks-fanout

	JobsStream       string // SHIPFILE_WEBHOOKS
	JobsFilter       string // shipfile.webhooks.>
	JobSubjectPrefix string // shipfile.webhooks. (then the hook id)
	DeliverConsumer  string // webhooks-deliver

	// AckWait of the delivery consumer: longer than one attempt (timeout + margin).
	// A handler also reports progress every AckWait/2.
	AckWait time.Duration
	// FanoutAckWait is the AckWait of the fan-out consumer (default 30s).
	FanoutAckWait time.Duration
	// MaxAckPending of the delivery consumer. Jobs waiting for their retry count, so it
	// is generous (default 100000).
	MaxAckPending int
	// Workers is the number of concurrent delivery workers of this instance (default 16).
	Workers int
	// FanoutBatch is how many events one fetch takes at most (default 32).
	FanoutBatch int
	// FetchWait is how long one fetch waits for messages; also the longest a stopping
	// dispatcher waits for its fetches (default 2s).
	FetchWait time.Duration
	// ShutdownTimeout is how long in-flight work may finish once Run's context is done;
	// then attempts are abandoned and their jobs go back to the queue (default 20s).
	ShutdownTimeout time.Duration
	// StatsInterval is the refresh period of the queue gauges (default 5s).
	StatsInterval time.Duration
}

// DefaultOptions returns the production names and defaults.
func DefaultOptions() Options {
	return Options{
		EventsStream:     events.StreamEvents,
		EventsFilter:     events.SubjectPrefix + ">",
		FanoutConsumer:   FanoutConsumer,
		JobsStream:       events.StreamWebhooks,
		JobsFilter:       events.WebhookSubjectPrefix + ">",
		JobSubjectPrefix: events.WebhookSubjectPrefix,
		DeliverConsumer:  DeliverConsumer,
		AckWait:          15 * time.Second,
		FanoutAckWait:    30 * time.Second,
		MaxAckPending:    100000,
		Workers:          16,
		FanoutBatch:      32,
		FetchWait:        2 * time.Second,
		ShutdownTimeout:  20 * time.Second,
		StatsInterval:    5 * time.Second,
	}
}

func (o *Options) defaults() {
	d := DefaultOptions()
	set := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	set(&o.EventsStream, d.EventsStream)
	set(&o.EventsFilter, d.EventsFilter)
	set(&o.FanoutConsumer, d.FanoutConsumer)
	set(&o.JobsStream, d.JobsStream)
	set(&o.JobsFilter, d.JobsFilter)
	set(&o.JobSubjectPrefix, d.JobSubjectPrefix)
	set(&o.DeliverConsumer, d.DeliverConsumer)
	if o.AckWait <= 0 {
		o.AckWait = d.AckWait
	}
	if o.FanoutAckWait <= 0 {
		o.FanoutAckWait = d.FanoutAckWait
	}
	if o.MaxAckPending <= 0 {
		o.MaxAckPending = d.MaxAckPending
	}
	if o.Workers <= 0 {
		o.Workers = d.Workers
	}
	if o.FanoutBatch <= 0 {
		o.FanoutBatch = d.FanoutBatch
	}
	if o.FetchWait <= 0 {
		o.FetchWait = d.FetchWait
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = d.ShutdownTimeout
	}
	if o.StatsInterval <= 0 {
		o.StatsInterval = d.StatsInterval
	}
}

// JobPublisher queues delivery jobs on the jobs stream.
type JobPublisher struct {
	js     jetstream.JetStream
	prefix string
}

var _ app.JobPublisher = (*JobPublisher)(nil)

// NewJobPublisher returns a publisher of jobs on subject prefix + hook id.
func NewJobPublisher(js jetstream.JetStream, prefix string) *JobPublisher {
	return &JobPublisher{js: js, prefix: prefix}
}

// PublishJob publishes job with msgID as Nats-Msg-Id and waits for the stream's ack.
func (p *JobPublisher) PublishJob(ctx context.Context, job *eventsv1.WebhookJob, msgID string) error {
	msg, err := events.WebhookJobMessage(job, msgID)
	if err != nil {
		return err
	}
	subject := p.prefix + strconv.FormatInt(job.GetHookId(), 10)
	if _, err := p.js.Publish(ctx, subject, msg.Data, jetstream.WithMsgID(msg.ID)); err != nil {
		return fmt.Errorf("publish webhook job on %s: %w", subject, err)
	}
	return nil
}

// Dispatcher runs the fan-out and the delivery workers of one instance on the shared
// durable consumers.
type Dispatcher struct {
	js        jetstream.JetStream
	fanout    *app.Fanout
	deliverer *app.Deliverer
	metrics   *app.Metrics
	log       *slog.Logger
	opts      Options
}

// NewDispatcher returns a Dispatcher; Run starts it.
func NewDispatcher(js jetstream.JetStream, fanout *app.Fanout, deliverer *app.Deliverer, metrics *app.Metrics, log *slog.Logger, opts Options) *Dispatcher {
	opts.defaults()
	return &Dispatcher{js: js, fanout: fanout, deliverer: deliverer, metrics: metrics, log: log, opts: opts}
}

// Options returns the dispatcher's options with defaults filled in.
func (d *Dispatcher) Options() Options { return d.opts }

// EnsureConsumers creates both durable pull consumers, or updates them to the current
// configuration. Every instance calls it at start; they share the consumers. Requests
// a NATS cluster drops or refuses for a while are retried (events.EnsureConsumer).
func (d *Dispatcher) EnsureConsumers(ctx context.Context) (fanout, deliver jetstream.Consumer, err error) {
	fanout, err = events.EnsureConsumer(ctx, d.js, d.opts.EventsStream, jetstream.ConsumerConfig{
		Durable:       d.opts.FanoutConsumer,
		Description:   "webhook dispatcher: fans package events out to subscriptions",
		FilterSubject: d.opts.EventsFilter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       d.opts.FanoutAckWait,
		MaxDeliver:    -1,
		MaxAckPending: 1000,
	})
	if err != nil {
		return nil, nil, err
	}
	deliver, err = events.EnsureConsumer(ctx, d.js, d.opts.JobsStream, jetstream.ConsumerConfig{
		Durable:       d.opts.DeliverConsumer,
		Description:   "webhook dispatcher: delivers webhook jobs",
		FilterSubject: d.opts.JobsFilter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       d.opts.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: d.opts.MaxAckPending,
	})
	if err != nil {
		return nil, nil, err
	}
	return fanout, deliver, nil
}

// Run ensures the consumers and runs the fan-out loop, the delivery workers and the
// gauge refresher until ctx is done. Then it stops fetching and lets in-flight work
// finish within ShutdownTimeout; attempts still running after that are abandoned and
// their jobs returned to the queue. It returns nil after a clean stop.
func (d *Dispatcher) Run(ctx context.Context) error {
	fanoutCons, deliverCons, err := d.EnsureConsumers(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started: a clean stop
		}
		return err
	}
	// Work runs on its own context, so a stop lets it finish; it is cancelled only when
	// the grace period is over.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()

	var wg sync.WaitGroup
	wg.Go(func() {
		events.Consume(ctx, fanoutCons, d.opts.FanoutBatch, d.opts.FetchWait, d.log, func(msg jetstream.Msg) { d.handleEvent(workCtx, msg) })
	})
	for range d.opts.Workers {
		// One job at a time: no job waits in a buffer while its AckWait runs.
		wg.Go(func() {
			events.Consume(ctx, deliverCons, 1, d.opts.FetchWait, d.log, func(msg jetstream.Msg) { d.handleJob(workCtx, msg) })
		})
	}
	wg.Go(func() {
		events.Every(ctx, d.opts.StatsInterval, func(ctx context.Context) { d.refreshStats(ctx, deliverCons) })
	})
	d.log.Info("dispatcher running", "workers", d.opts.Workers,
		"fanout_consumer", d.opts.FanoutConsumer, "deliver_consumer", d.opts.DeliverConsumer)

	<-ctx.Done()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(d.opts.ShutdownTimeout):
	}
	d.log.Warn("in-flight deliveries outlived the shutdown timeout; abandoning them", "timeout", d.opts.ShutdownTimeout)
	cancelWork()
	<-done
	return nil
}

// handleEvent fans one event out and acknowledges it, or returns it for a later try.
func (d *Dispatcher) handleEvent(ctx context.Context, msg jetstream.Msg) {
	hctx, cancel := context.WithTimeout(ctx, d.opts.FanoutAckWait*2/3)
	defer cancel()
	err := d.fanout.Handle(hctx, msg.Data())
	switch {
	case err == nil:
		if err := msg.Ack(); err != nil {
			d.log.Warn("ack event", "subject", msg.Subject(), "err", err)
		}
	case errors.Is(err, app.ErrPoison):
		d.log.Error("poison event terminated", "subject", msg.Subject(), "reason", err.Error())
		if err := msg.Term(); err != nil {
			d.log.Warn("term event", "subject", msg.Subject(), "err", err)
		}
	default:
		delay := backoff.TransientDelay(events.NumDelivered(msg))
		d.log.Warn("fan-out failed; event will be retried", "subject", msg.Subject(), "err", err, "retry_in", delay.String())
		if err := msg.NakWithDelay(delay); err != nil {
			d.log.Warn("nak event", "subject", msg.Subject(), "err", err)
		}
	}
}

// handleJob delivers one job, reporting progress while the attempt runs long.
func (d *Dispatcher) handleJob(ctx context.Context, msg jetstream.Msg) {
	stop := events.KeepAlive(msg, d.opts.AckWait/2)
	dec := d.deliverer.Deliver(ctx, msg.Data(), events.NumDelivered(msg))
	stop()
	if dec.Action == app.Term {
		d.log.Error("poison webhook job terminated", "subject", msg.Subject(), "reason", dec.Reason)
	}
	if err := events.Settle(msg, dec); err != nil {
		d.log.Warn("settle webhook job", "subject", msg.Subject(), "err", err)
	}
}

// refreshStats refreshes the queue gauges.
func (d *Dispatcher) refreshStats(ctx context.Context, cons jetstream.Consumer) {
	if info, err := cons.Info(ctx); err == nil {
		d.metrics.QueueDepth.Set(float64(info.NumPending) + float64(info.NumAckPending))
	} else if ctx.Err() == nil {
		d.log.Debug("delivery consumer info", "err", err)
	}
	if age, err := d.deliverer.OldestPending(ctx); err == nil {
		d.metrics.OldestPending.Set(age.Seconds())
	} else if ctx.Err() == nil {
		d.log.Debug("oldest pending delivery", "err", err)
	}
}
