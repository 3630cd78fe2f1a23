// Package previewconsumer runs the gateway's consumer of package.file_uploaded that
// makes image previews (internal/app/previews), through the consumer runtime of
// pkg/consumer.
package previewconsumer

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/gateway/internal/app/previews"
)

// ConsumerName is the durable consumer every gateway instance shares: each uploaded
// file goes to one of them.
const ConsumerName = "gateway-previews"

// Options name the stream and the consumer and tune the loop.
type Options struct {
	Stream   string // SHIPFILE_EVENTS
	Consumer string // gateway-previews
	// AckWait: a preview that takes longer is delivered again (to this or another
	// instance); the runtime reports progress every AckWait/2 meanwhile.
	AckWait   time.Duration
	FetchWait time.Duration
	// ShutdownTimeout is how long a preview in progress may finish once Run's context
	// is done; then it is handed back.
	ShutdownTimeout time.Duration
	Log             *slog.Logger
	// Metrics of the consumer runtime; nil: none.
	Metrics *consumer.Metrics
}

// Consumer makes the previews of one gateway instance, one file at a time (a decoded
// image is the largest thing a gateway holds).
type Consumer struct {
	js    jetstream.JetStream
	maker *previews.Maker
	opts  Options
}

// New returns a Consumer; Run starts it.
func New(js jetstream.JetStream, maker *previews.Maker, opts Options) *Consumer {
	if opts.Stream == "" {
		opts.Stream = events.StreamEvents
	}
	if opts.Consumer == "" {
		opts.Consumer = ConsumerName
	}
	if opts.AckWait <= 0 {
		opts.AckWait = 30 * time.Second
	}
	if opts.FetchWait <= 0 {
		opts.FetchWait = 2 * time.Second
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Consumer{js: js, maker: maker, opts: opts}
}

// Ensure creates or updates the durable consumer. A new consumer starts with every
// package.file_uploaded the stream still holds, so files uploaded before the first
// gateway with previews started get theirs too.
func (c *Consumer) Ensure(ctx context.Context) (jetstream.Consumer, error) {
	return events.EnsureConsumer(ctx, c.js, c.opts.Stream, jetstream.ConsumerConfig{
		Durable:       c.opts.Consumer,
		Description:   "gateway: makes the image previews of uploaded files",
		FilterSubject: events.Subject(events.TypePackageFileUploaded),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.opts.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 10000,
	})
}

// Run ensures the consumer and makes previews until ctx is done.
func (c *Consumer) Run(ctx context.Context) error {
	cons, err := c.Ensure(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	rt := consumer.NewSingle(func(ctx context.Context, msg jetstream.Msg) consumer.Decision {
		return consumer.Decide(c.maker.Handle(ctx, msg.Data(), consumer.NumDelivered(msg)))
	}, consumer.Options{Name: c.opts.Consumer, Log: c.opts.Log, Metrics: c.opts.Metrics, KeepAlive: c.opts.AckWait / 2})
	g := consumer.NewGroup(ctx)
	g.Pull(rt, cons, 1, consumer.PullOptions{Batch: 1, Wait: c.opts.FetchWait})
	if g.Wait(c.opts.ShutdownTimeout) {
		c.opts.Log.Warn("a preview in progress outlived the shutdown timeout; handed back", "timeout", c.opts.ShutdownTimeout)
	}
	return nil
}
