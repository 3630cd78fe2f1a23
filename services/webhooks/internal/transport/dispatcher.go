// Package transport connects the dispatcher to the outside: the JetStream consumers of
// package events and due delivery jobs (one per subscription), the retry queue, and the
// HTTP sender of webhook requests with its SSRF guard.
//
// The Dispatcher and its Run loop are in this file; its names and knobs in options.go;
// creating, reconciling and removing the durable consumers in consumers.go; a
// subscription's workers in workers.go; turning a message into its fate in handlers.go;
// the queue gauges in stats.go; an ordered subscription's releases in release.go; the
// attempt journal in journal.go; and the webhook POST (HTTPSender.Send) in sender.go.
package transport

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// Listener pushes subscription changes (the store's LISTEN connection).
type Listener interface {
	// Listen calls connected once listening, then changed for every changed
	// subscription, until ctx is done or the connection fails.
	Listen(ctx context.Context, connected func(), changed func(id int64)) error
}

// Parts are what a Dispatcher runs.
type Parts struct {
	Subscriptions *app.Subscriptions
	Listener      Listener
	Events        *app.EventJobs
	Deliverer     *app.Deliverer
	// Order is the Deliverer's order of ordered subscriptions' deliveries (nil: none):
	// the events such a subscription does not take are passed over in it, and its
	// released deliveries that went unattempted are handed over again.
	Order *app.Order
	// Journal is the Deliverer's attempt journal and JournalStore where its consumer
	// writes the records (both nil: none).
	Journal      *Journal
	JournalStore JournalStore
	Health       *app.Health
	Metrics      *app.Metrics
	Log          *slog.Logger
}

// Dispatcher runs the deliveries of one instance on the shared durable consumers: one
// delivery consumer per subscription on the events stream (its events and its due
// jobs; MaxAckPending = its max_in_flight, so the cap holds across every instance, for
// first attempts and retries alike, and a slow receiver holds up only its own
// consumer), the retry consumer holding jobs until their next attempt, and the queued
// consumer moving redeliveries to their due subjects.
type Dispatcher struct {
	js   jetstream.JetStream
	p    Parts
	log  *slog.Logger
	opts Options

	sem      chan struct{} // the instance's attempts in flight (Workers)
	inflight sync.WaitGroup

	// The runtimes settling the messages of the delivery (every subscription's), retry,
	// queued and journal consumers.
	deliver, retry, queued, journal *consumer.Runtime
	// settler acknowledges the delivery consumers' messages: those of one group commit
	// together (one write to NATS instead of one per message).
	settler *consumer.Settler
	// legacyFloor is the last event the fan-out consumer of the versions before the one
	// hop had acknowledged when this instance started (nil: none was left): the
	// delivery consumers created meanwhile start after it, and the fan-out consumer is
	// deleted once every subscription has its own.
	legacyFloor *uint64
}

// NewDispatcher returns a Dispatcher; Run starts it.
func NewDispatcher(js jetstream.JetStream, p Parts, opts Options) *Dispatcher {
	opts.defaults()
	d := &Dispatcher{js: js, p: p, log: p.Log, opts: opts, sem: make(chan struct{}, opts.Workers)}
	d.settler = consumer.NewSettler(opts.DeliverConsumer, p.Log)
	d.deliver = consumer.NewSingle(d.handleMsg, consumer.Options{
		Name: opts.DeliverConsumer, Log: p.Log, Metrics: opts.Metrics,
		KeepAlive: opts.AckWait / 2, // an attempt reports progress while it runs long
		Settler:   d.settler,
	})
	d.retry = consumer.NewSingle(d.handleRetry, consumer.Options{Name: opts.RetryConsumer, Log: p.Log, Metrics: opts.Metrics})
	d.queued = consumer.NewSingle(d.handleRetry, consumer.Options{Name: opts.QueuedConsumer, Log: p.Log, Metrics: opts.Metrics})
	d.journal = consumer.New(d.handleJournal, consumer.Options{Name: opts.JournalConsumer, Log: p.Log, Metrics: opts.Metrics})
	return d
}

// Options returns the dispatcher's options with defaults filled in.
func (d *Dispatcher) Options() Options { return d.opts }

// Run ensures the consumers and runs the delivery consumers of every subscription, the
// retry and queued loops, the subscription listener, the health pass and the gauge
// refresher until ctx is done. Then it stops fetching and lets in-flight work finish
// within ShutdownTimeout; attempts still running after that are abandoned and their
// messages returned to the queue. It returns nil after a clean stop.
func (d *Dispatcher) Run(ctx context.Context) error {
	defer d.settler.Close() // on every return; after a clean stop it is closed below
	retryCons, queuedCons, journalCons, err := d.EnsureConsumers(ctx)
	if err == nil {
		err = d.readLegacyFloor(ctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started: a clean stop
		}
		return err
	}
	// The loops run in one consumer.Group: they stop fetching when ctx is done, while
	// the work they started runs on the group's work context, cancelled only when the
	// grace period (ShutdownTimeout) is over.
	g := consumer.NewGroup(ctx)
	workCtx := g.Work()

	subs := d.p.Subscriptions
	if err := subs.Reload(ctx); err != nil && ctx.Err() == nil {
		d.log.Warn("load subscriptions", "err", err)
	}
	g.Go(func() { d.listen(ctx) })
	g.Pull(d.retry, retryCons, 1, consumer.PullOptions{Batch: 256, Wait: d.opts.FetchWait})
	g.Pull(d.queued, queuedCons, 1, consumer.PullOptions{Batch: 256, Wait: d.opts.FetchWait})
	if d.p.JournalStore != nil {
		g.Pull(d.journal, journalCons, 1, consumer.PullOptions{Batch: journalFetch, Wait: d.opts.FetchWait, Together: true, Linger: JournalLinger})
	}
	g.Go(func() { consumer.Every(ctx, d.opts.StatsInterval, d.refreshStats) })
	g.Go(func() { consumer.Every(ctx, d.p.Health.Interval(), d.p.Health.Pass) })
	g.Go(func() { consumer.Every(ctx, d.p.Health.Interval(), d.p.Health.Heartbeat) })
	if d.p.Order != nil {
		g.Go(func() {
			consumer.Every(ctx, d.p.Health.Interval(), func(ctx context.Context) {
				if err := d.p.Order.ReleaseStalled(ctx); err != nil && ctx.Err() == nil {
					d.log.Warn("hand over released ordered deliveries again", "err", err)
				}
			})
		})
	}

	hooks := map[int64]*hookConsumer{}
	d.reconcile(ctx, workCtx, hooks, true)
	d.log.Info("dispatcher running", "workers", d.opts.Workers, "subscriptions", len(hooks),
		"events_stream", d.opts.EventsStream, "deliver_consumers", d.opts.DeliverConsumer+"-<hook id>")
	tick := time.NewTicker(d.opts.ReconcileInterval)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-subs.Updates():
		case <-tick.C:
		}
		d.reconcile(ctx, workCtx, hooks, false)
	}

	// Stop pulling; messages already buffered are handed back (Nak) at once. The
	// deliveries in flight belong to the group too.
	for _, h := range hooks {
		h.cc.Drain()
	}
	g.Go(func() {
		for _, h := range hooks {
			<-h.cc.Closed()
		}
		d.inflight.Wait()
	})
	if g.Wait(d.opts.ShutdownTimeout) {
		d.log.Warn("in-flight deliveries outlived the shutdown timeout; abandoned them", "timeout", d.opts.ShutdownTimeout)
	}
	d.settler.Close() // the messages handled last are settled
	d.p.Deliverer.Close()
	d.p.Order.Close()
	if d.p.Journal != nil {
		d.p.Journal.Close()
	}
	if d.p.JournalStore != nil {
		jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), journalDrainTimeout)
		// What is left in the journal is written before this instance exits: a dispatcher
		// that stops last leaves no delivered attempt out of the log until the next starts.
		d.journal.Drain(jctx, journalCons, journalFetch)
		cancel()
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	d.p.Health.Leave(lctx)
	return nil
}

// listen keeps the subscription cache's LISTEN connection, reconnecting after a
// second when it fails; while it is down, the cache is stale and reads go to the store.
func (d *Dispatcher) listen(ctx context.Context) {
	subs := d.p.Subscriptions
	for ctx.Err() == nil {
		err := d.p.Listener.Listen(ctx, func() {
			subs.Listening(true)
			if err := subs.Reload(ctx); err != nil && ctx.Err() == nil {
				d.log.Warn("reload subscriptions", "err", err)
			}
		}, func(id int64) { subs.Changed(ctx, id) })
		subs.Listening(false)
		if ctx.Err() != nil {
			return
		}
		d.log.Warn("subscription listener down; reading subscriptions from the database until it is back", "err", err)
		sleep(ctx, time.Second)
	}
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
