// Package transport connects the mailer to the outside: the JetStream consumer of mail
// jobs (shared by every instance) and the SMTP sender (wneessen/go-mail).
package transport

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/mailer/internal/app"
)

// ConsumerName is the production name of the durable consumer every instance shares.
const ConsumerName = "mailer"

// Options name the stream and consumer the mailer uses and tune its loop.
// DefaultOptions has the production names; tests give each run its own.
type Options struct {
	Stream   string // SHIPFILE_MAIL
	Filter   string // shipfile.mail.>
	Consumer string // mailer

	// AckWait of the consumer: longer than one send. A handler also reports progress
	// every AckWait/2 while its e-mail is being sent.
	AckWait time.Duration
	// MaxAckPending of the consumer, across all instances. Jobs waiting for their retry
	// count, so it is generous (default 10000).
	MaxAckPending int
	// Workers is the number of concurrent sends of this instance (default 4).
	Workers int
	// FetchWait is how long one fetch waits for messages; also the longest a stopping
	// consumer waits for its fetches (default 2s).
	FetchWait time.Duration
	// ShutdownTimeout is how long in-flight sends may finish once Run's context is
	// done; then they are abandoned and their jobs go back to the queue (default 20s).
	ShutdownTimeout time.Duration
	// StatsInterval is the refresh period of the queue gauge (default 5s).
	StatsInterval time.Duration
}

// DefaultOptions returns the production names and defaults.
func DefaultOptions() Options {
	return Options{
		Stream:          events.StreamMail,
		Filter:          events.MailSubjectPrefix + ">",
		Consumer:        ConsumerName,
		AckWait:         40 * time.Second,
		MaxAckPending:   10000,
		Workers:         4,
		FetchWait:       2 * time.Second,
		ShutdownTimeout: 20 * time.Second,
		StatsInterval:   5 * time.Second,
	}
}

func (o *Options) defaults() {
	d := DefaultOptions()
	if o.Stream == "" {
		o.Stream = d.Stream
	}
	if o.Filter == "" {
		o.Filter = d.Filter
	}
	if o.Consumer == "" {
		o.Consumer = d.Consumer
	}
	if o.AckWait <= 0 {
		o.AckWait = d.AckWait
	}
	if o.MaxAckPending <= 0 {
		o.MaxAckPending = d.MaxAckPending
	}
	if o.Workers <= 0 {
		o.Workers = d.Workers
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

// Consumer runs the mail workers of one instance on the shared durable consumer.
type Consumer struct {
	js      jetstream.JetStream
	mailer  *app.Mailer
	metrics *app.Metrics
	log     *slog.Logger
	opts    Options
}

// NewConsumer returns a Consumer; Run starts it.
func NewConsumer(js jetstream.JetStream, mailer *app.Mailer, metrics *app.Metrics, log *slog.Logger, opts Options) *Consumer {
	opts.defaults()
	return &Consumer{js: js, mailer: mailer, metrics: metrics, log: log, opts: opts}
}

// Options returns the consumer's options with defaults filled in.
func (c *Consumer) Options() Options { return c.opts }

// Ensure creates the durable pull consumer, or updates it to the current
// configuration. Every instance calls it at start; they share the consumer. Requests
// a NATS cluster drops or refuses for a while are retried (events.EnsureConsumer).
func (c *Consumer) Ensure(ctx context.Context) (jetstream.Consumer, error) {
	return events.EnsureConsumer(ctx, c.js, c.opts.Stream, jetstream.ConsumerConfig{
		Durable:       c.opts.Consumer,
		Description:   "mailer: sends the recipients' e-mails",
		FilterSubject: c.opts.Filter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.opts.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: c.opts.MaxAckPending,
	})
}

// Run ensures the consumer and runs the workers and the gauge refresher until ctx is
// done. Then it stops fetching and lets in-flight sends finish within
// ShutdownTimeout; sends still running after that are abandoned and their jobs
// returned to the queue. It returns nil after a clean stop.
func (c *Consumer) Run(ctx context.Context) error {
	cons, err := c.Ensure(ctx)
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
	for range c.opts.Workers {
		// One job at a time: no job waits in a buffer while its AckWait runs.
		wg.Go(func() {
			events.Consume(ctx, cons, 1, c.opts.FetchWait, c.log, func(msg jetstream.Msg) { c.handle(workCtx, msg) })
		})
	}
	wg.Go(func() {
		events.Every(ctx, c.opts.StatsInterval, func(ctx context.Context) { c.refreshStats(ctx, cons) })
	})
	c.log.Info("mailer running", "workers", c.opts.Workers, "consumer", c.opts.Consumer, "stream", c.opts.Stream)

	<-ctx.Done()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(c.opts.ShutdownTimeout):
	}
	c.log.Warn("in-flight sends outlived the shutdown timeout; abandoning them", "timeout", c.opts.ShutdownTimeout)
	cancelWork()
	<-done
	return nil
}

// handle sends one job's e-mail, reporting progress while it runs long, and settles
// the message as the mailer decided.
func (c *Consumer) handle(ctx context.Context, msg jetstream.Msg) {
	stop := events.KeepAlive(msg, c.opts.AckWait/2)
	dec := c.mailer.Handle(ctx, msg.Data(), events.NumDelivered(msg))
	stop()
	if dec.Action == app.Term {
		c.log.Error("poison mail job terminated", "subject", msg.Subject(), "reason", dec.Reason)
	}
	if err := events.Settle(msg, dec); err != nil {
		c.log.Warn("settle mail job", "subject", msg.Subject(), "err", err)
	}
}

// refreshStats refreshes the queue gauge.
func (c *Consumer) refreshStats(ctx context.Context, cons jetstream.Consumer) {
	if info, err := cons.Info(ctx); err == nil {
		c.metrics.QueueDepth.Set(float64(info.NumPending) + float64(info.NumAckPending))
	} else if ctx.Err() == nil {
		c.log.Debug("mail consumer info", "err", err)
	}
}
