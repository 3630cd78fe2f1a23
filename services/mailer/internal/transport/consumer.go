// Package transport connects the mailer to the outside: the JetStream consumer of mail
// jobs (shared by every instance) and the SMTP sender (wneessen/go-mail).
package transport

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/consumer"
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
	// Metrics of the consumer runtime, shared by the process's consumers; nil: none.
	Metrics *consumer.Metrics
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
	orDefault(&o.Stream, d.Stream)
	orDefault(&o.Filter, d.Filter)
	orDefault(&o.Consumer, d.Consumer)
	orDefault(&o.AckWait, d.AckWait)
	orDefault(&o.MaxAckPending, d.MaxAckPending)
	orDefault(&o.Workers, d.Workers)
	orDefault(&o.FetchWait, d.FetchWait)
	orDefault(&o.ShutdownTimeout, d.ShutdownTimeout)
	orDefault(&o.StatsInterval, d.StatsInterval)
}

// orDefault sets *v to def when *v is the zero value or, for numbers and durations,
// not positive.
func orDefault[T cmp.Ordered](v *T, def T) {
	var zero T
	if *v <= zero {
		*v = def
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
	rt := consumer.NewSingle(c.handle, consumer.Options{
		Name:      c.opts.Consumer,
		Log:       c.log,
		Metrics:   c.opts.Metrics,
		KeepAlive: c.opts.AckWait / 2, // a send reports progress while it runs long
	})
	g := consumer.NewGroup(ctx)
	// One job at a time per worker: no job waits in a buffer while its AckWait runs.
	g.Pull(rt, cons, c.opts.Workers, consumer.PullOptions{Batch: 1, Wait: c.opts.FetchWait})
	g.Go(func() {
		consumer.Every(ctx, c.opts.StatsInterval, func(ctx context.Context) { c.refreshStats(ctx, cons) })
	})
	c.log.Info("mailer running", "workers", c.opts.Workers, "consumer", c.opts.Consumer, "stream", c.opts.Stream)
	if g.Wait(c.opts.ShutdownTimeout) {
		c.log.Warn("in-flight sends outlived the shutdown timeout; abandoned them", "timeout", c.opts.ShutdownTimeout)
	}
	return nil
}

// handle sends one job's e-mail; the mailer decides what becomes of the message.
func (c *Consumer) handle(ctx context.Context, msg jetstream.Msg) consumer.Decision {
	return consumer.Decide(c.mailer.Handle(ctx, msg.Data(), consumer.NumDelivered(msg)))
}

// refreshStats refreshes the queue gauge.
func (c *Consumer) refreshStats(ctx context.Context, cons jetstream.Consumer) {
	if info, err := cons.Info(ctx); err == nil {
		c.metrics.QueueDepth.Set(float64(info.NumPending) + float64(info.NumAckPending))
	} else if ctx.Err() == nil {
		c.log.Debug("mail consumer info", "err", err)
	}
}
