package transport

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/mailer/internal/app"
)

// NotifyConsumerName is the production name of the durable consumer of package events
// that every mailer instance shares for the owner notifications.
const NotifyConsumerName = "mailer-notify"

// NotifyOptions name the events stream and consumer of the owner notifications and
// tune their loops. DefaultNotifyOptions has the production names.
type NotifyOptions struct {
	Stream   string // SHIPFILE_EVENTS
	Consumer string // mailer-notify
	// AckWait of the consumer: recording an event is one short statement, and a
	// handler in progress is kept alive every AckWait/2 (see NotifyAckWait).
	AckWait time.Duration
	// Workers consume events at once in this instance (default 2).
	Workers int
	// FetchWait is how long one fetch waits for events (default 2s).
	FetchWait time.Duration
	// Poll is how often this instance closes quiet bursts and sends due notifications
	// (default 1s).
	Poll time.Duration
	// ShutdownTimeout is how long a send in flight may finish once Run's context is done.
	ShutdownTimeout time.Duration
	// Metrics of the consumer runtime, shared by the process's consumers; nil: none.
	Metrics *consumer.Metrics
}

// DefaultNotifyOptions returns the production names and defaults.
func DefaultNotifyOptions() NotifyOptions {
	return NotifyOptions{
		Stream:          events.StreamEvents,
		Consumer:        NotifyConsumerName,
		AckWait:         30 * time.Second,
		Workers:         2,
		FetchWait:       2 * time.Second,
		Poll:            time.Second,
		ShutdownTimeout: 20 * time.Second,
	}
}

func (o *NotifyOptions) defaults() {
	d := DefaultNotifyOptions()
	orDefault(&o.Stream, d.Stream)
	orDefault(&o.Consumer, d.Consumer)
	orDefault(&o.AckWait, d.AckWait)
	orDefault(&o.Workers, d.Workers)
	orDefault(&o.FetchWait, d.FetchWait)
	orDefault(&o.Poll, d.Poll)
	orDefault(&o.ShutdownTimeout, d.ShutdownTimeout)
}

// NotifyAckWait is the AckWait of the notification consumer for a burst quiet period
// of quiet: half of it (at least 1 s, at most 30 s). An event held by an instance that
// dies comes back after AckWait, so it must come back before its burst can be closed as
// quiet, or the e-mail would miss its file and a second burst would start with it alone.
func NotifyAckWait(quiet time.Duration) time.Duration {
	return min(max(quiet/2, time.Second), 30*time.Second)
}

// NotifyConsumer runs one instance's share of the owner notifications: it records
// package.downloaded and package.file_uploaded events from SHIPFILE_EVENTS (a durable
// consumer of its own, shared by every instance) and sends what is due.
type NotifyConsumer struct {
	js       jetstream.JetStream
	notifier *app.Notifier
	log      *slog.Logger
	opts     NotifyOptions
}

// NewNotifyConsumer returns a NotifyConsumer; Run starts it.
func NewNotifyConsumer(js jetstream.JetStream, notifier *app.Notifier, log *slog.Logger, opts NotifyOptions) *NotifyConsumer {
	opts.defaults()
	return &NotifyConsumer{js: js, notifier: notifier, log: log, opts: opts}
}

// Ensure creates the durable consumer, or updates it. A new consumer starts with the
// events published from then on: the owner is not told of downloads from before.
func (c *NotifyConsumer) Ensure(ctx context.Context) (jetstream.Consumer, error) {
	return events.EnsureConsumer(ctx, c.js, c.opts.Stream, jetstream.ConsumerConfig{
		Durable:     c.opts.Consumer,
		Description: "mailer: tells package owners of downloads and recipient uploads",
		// One filter NATS 2.9 understands (no FilterSubjects): the package events; the
		// notifier acknowledges all but downloads and uploads at once.
		FilterSubject: events.SubjectPrefix + "package.*",
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.opts.AckWait,
		MaxDeliver:    -1,
	})
}

// Run ensures the consumer and runs the event workers and the send loop until ctx is
// done; a send in flight then gets ShutdownTimeout to finish.
func (c *NotifyConsumer) Run(ctx context.Context) error {
	cons, err := c.Ensure(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	rt := consumer.NewSingle(consumer.Errors(func(ctx context.Context, msg jetstream.Msg) error {
		return c.notifier.HandleEvent(ctx, msg.Data(), consumer.NumDelivered(msg))
	}), consumer.Options{Name: c.opts.Consumer, Log: c.log, Metrics: c.opts.Metrics, KeepAlive: c.opts.AckWait / 2})
	g := consumer.NewGroup(ctx)
	g.Pull(rt, cons, c.opts.Workers, consumer.PullOptions{Batch: 1, Wait: c.opts.FetchWait})
	g.Go(func() {
		t := time.NewTicker(c.opts.Poll)
		defer t.Stop()
		for {
			c.notifier.Tick(ctx, g.Work())
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	c.log.Info("owner notifications running", "consumer", c.opts.Consumer, "stream", c.opts.Stream)
	if g.Wait(c.opts.ShutdownTimeout) {
		c.log.Warn("a notification in flight outlived the shutdown timeout; abandoned it", "timeout", c.opts.ShutdownTimeout)
	}
	return nil
}
