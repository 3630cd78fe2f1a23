package transport

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/scanner/internal/app"
)

// ConsumerName is the production name of the durable consumer every scanner instance
// shares: each uploaded file goes to one of them.
const ConsumerName = "scanner"

// Options name the stream and the consumer and tune the loops.
type Options struct {
	Stream   string // SHIPFILE_EVENTS
	Consumer string // scanner
	// AckWait: a scan in progress reports progress every AckWait/2; a scanner that dies
	// mid-file has its file delivered to another instance after AckWait.
	AckWait time.Duration
	// Workers are the files this instance scans at once.
	Workers int
	// FetchWait is how long one fetch waits for events.
	FetchWait time.Duration
	// ShutdownTimeout is how long scans in flight may finish once Run's context is done;
	// then they are handed back.
	ShutdownTimeout time.Duration
	// Metrics of the consumer runtime; nil: none.
	Metrics *consumer.Metrics
}

// DefaultOptions returns the production names and defaults.
func DefaultOptions() Options {
	return Options{
		Stream: events.StreamEvents, Consumer: ConsumerName, AckWait: 30 * time.Second,
		Workers: 4, FetchWait: 2 * time.Second, ShutdownTimeout: 20 * time.Second,
	}
}

// Consumer runs one instance's share of the scanning.
type Consumer struct {
	js      jetstream.JetStream
	scanner *app.Scanner
	log     *slog.Logger
	opts    Options
}

// NewConsumer returns a Consumer; Run starts it.
func NewConsumer(js jetstream.JetStream, scanner *app.Scanner, log *slog.Logger, opts Options) *Consumer {
	d := DefaultOptions()
	if opts.Stream == "" {
		opts.Stream = d.Stream
	}
	if opts.Consumer == "" {
		opts.Consumer = d.Consumer
	}
	if opts.AckWait <= 0 {
		opts.AckWait = d.AckWait
	}
	if opts.Workers <= 0 {
		opts.Workers = d.Workers
	}
	if opts.FetchWait <= 0 {
		opts.FetchWait = d.FetchWait
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = d.ShutdownTimeout
	}
	return &Consumer{js: js, scanner: scanner, log: log, opts: opts}
}

// Ensure creates or updates the durable consumer. A new consumer starts with every
// package.file_uploaded the stream still holds, so files uploaded before the first
// scanner started are scanned too (those gone since are acknowledged at once).
func (c *Consumer) Ensure(ctx context.Context) (jetstream.Consumer, error) {
	return events.EnsureConsumer(ctx, c.js, c.opts.Stream, jetstream.ConsumerConfig{
		Durable:       c.opts.Consumer,
		Description:   "scanner: streams each uploaded file to clamd and records the verdict",
		FilterSubject: events.Subject(events.TypePackageFileUploaded),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.opts.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 10000,
	})
}

// Run ensures the consumer and scans with Workers loops until ctx is done.
func (c *Consumer) Run(ctx context.Context) error {
	cons, err := c.Ensure(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	rt := consumer.NewSingle(func(ctx context.Context, msg jetstream.Msg) consumer.Decision {
		return consumer.Decide(c.scanner.Handle(ctx, msg.Data(), consumer.NumDelivered(msg)))
	}, consumer.Options{Name: c.opts.Consumer, Log: c.log, Metrics: c.opts.Metrics, KeepAlive: c.opts.AckWait / 2})
	g := consumer.NewGroup(ctx)
	// A loop for each scan slot (app.Slots), one for each file that may linger for a
	// slot, and one more: while every slot scans and as many files linger, it hands back
	// the files of the packages that hold them and finds those of the others.
	g.Pull(rt, cons, 2*c.opts.Workers+1, consumer.PullOptions{Batch: 1, Wait: c.opts.FetchWait})
	c.log.Info("scanner running", "workers", c.opts.Workers, "consumer", c.opts.Consumer, "stream", c.opts.Stream)
	if g.Wait(c.opts.ShutdownTimeout) {
		c.log.Warn("scans in flight outlived the shutdown timeout; handed back", "timeout", c.opts.ShutdownTimeout)
	}
	return nil
}
