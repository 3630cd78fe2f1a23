// Package transport connects the dispatcher to the outside: the JetStream consumers of
// package events and due delivery jobs (one per subscription), the retry queue, and the
// HTTP sender of webhook requests with its SSRF guard.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// Production names of the durable consumers.
const (
	// FanoutConsumer is the consumer of package events of the versions that queued a
	// job per delivery (before the one hop). Run deletes it once every subscription has
	// its own consumer of the events, which start where it had got to.
	FanoutConsumer = "webhooks-fanout"
	// DeliverConsumer names the delivery consumers: one per subscription on
	// SHIPFILE_EVENTS, DeliverConsumer + "-" + its id, taking the subscription's events
	// and its due jobs. (The versions before the one hop had them on SHIPFILE_WEBHOOKS;
	// Run deletes those.)
	DeliverConsumer = "webhooks-deliver"
	// RetryConsumer holds the jobs waiting for their next attempt.
	RetryConsumer = "webhooks-retry"
	// QueuedConsumer moves the jobs queued on a subscription's subject of
	// SHIPFILE_WEBHOOKS (redeliveries asked through the API, and the jobs the fan-out
	// of earlier versions queued) to its due subject.
	QueuedConsumer = "webhooks-queued"
)

// HeaderNotBefore is the header of a job waiting on the retry subject: Unix
// milliseconds before which its next attempt must not start.
const HeaderNotBefore = "Shipfile-Not-Before"

// Options name the streams, subjects and consumers the dispatcher uses and tune its
// loops. DefaultOptions has the production names; tests give each run its own.
type Options struct {
	EventsStream string // SHIPFILE_EVENTS
	// EventsFilter is the subjects of every package event (shipfile.events.>): a
	// subscription's type t is on strings.TrimSuffix(EventsFilter, ">") + t.
	EventsFilter string
	// DueSubjectPrefix starts the subject of a subscription's due jobs on EventsStream
	// (shipfile.webhook-due., then the hook id).
	DueSubjectPrefix string
	FanoutConsumer   string // webhooks-fanout: deleted once the per-subscription consumers exist

	JobsStream       string // SHIPFILE_WEBHOOKS
	JobSubjectPrefix string // shipfile.webhooks. (then the hook id): redeliveries asked through the API
	DeliverConsumer  string // webhooks-deliver (then "-" and the hook id)
	// RetrySubjectPrefix starts the subjects of jobs waiting for their next attempt
	// (then the hook id); default JobSubjectPrefix + "retry.".
	RetrySubjectPrefix string
	RetryConsumer      string // webhooks-retry
	QueuedConsumer     string // webhooks-queued

	// AckWait of the delivery consumers: longer than one attempt (timeout + margin).
	// A handler also reports progress every AckWait/2. A killed instance's slots of a
	// subscription's max_in_flight come back after AckWait.
	AckWait time.Duration
	// MaxAckPending of the retry consumer: jobs waiting for their next attempt, across
	// all instances (default 100000; when reached, new retries wait).
	MaxAckPending int
	// Workers caps the attempts in flight in this instance, all subscriptions together
	// (default 256); each subscription also has its own cap (max_in_flight).
	Workers int
	// FetchWait is how long one fetch waits for messages; also the longest a stopping
	// dispatcher waits for its fetches (default 2s).
	FetchWait time.Duration
	// ShutdownTimeout is how long in-flight work may finish once Run's context is done;
	// then attempts are abandoned and their messages go back to the queue (default 20s).
	ShutdownTimeout time.Duration
	// StatsInterval is the refresh period of the queue gauges (default 5s).
	StatsInterval time.Duration
	// ReconcileInterval is how often the delivery consumers are checked against the
	// subscriptions without a pushed change (default 30s).
	ReconcileInterval time.Duration
	// FreshFor is how long after it was stored an event is taken to be handed out for
	// the first time when JetStream says so (default 10m): an older one (a backlog, or a
	// subscription's consumer created again, which starts at the subscription's
	// creation) has its delivery's row read before the attempt, so a delivery that
	// succeeded is not sent again.
	FreshFor time.Duration
	// Metrics of the consumer runtime, shared by the process's consumers; nil: none.
	Metrics *consumer.Metrics
}

// DefaultOptions returns the production names and defaults.
func DefaultOptions() Options {
	return Options{
		EventsStream:      events.StreamEvents,
		EventsFilter:      events.SubjectPrefix + ">",
		DueSubjectPrefix:  events.WebhookDueSubjectPrefix,
		FanoutConsumer:    FanoutConsumer,
		JobsStream:        events.StreamWebhooks,
		JobSubjectPrefix:  events.WebhookSubjectPrefix,
		DeliverConsumer:   DeliverConsumer,
		RetryConsumer:     RetryConsumer,
		QueuedConsumer:    QueuedConsumer,
		AckWait:           15 * time.Second,
		MaxAckPending:     100000,
		Workers:           256,
		FetchWait:         2 * time.Second,
		ShutdownTimeout:   20 * time.Second,
		StatsInterval:     5 * time.Second,
		ReconcileInterval: 30 * time.Second,
		FreshFor:          10 * time.Minute,
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
	set(&o.DueSubjectPrefix, d.DueSubjectPrefix)
	set(&o.FanoutConsumer, d.FanoutConsumer)
	set(&o.JobsStream, d.JobsStream)
	set(&o.JobSubjectPrefix, d.JobSubjectPrefix)
	set(&o.DeliverConsumer, d.DeliverConsumer)
	set(&o.RetrySubjectPrefix, o.JobSubjectPrefix+"retry.")
	set(&o.RetryConsumer, d.RetryConsumer)
	set(&o.QueuedConsumer, d.QueuedConsumer)
	pos := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	pos(&o.AckWait, d.AckWait)
	pos(&o.FetchWait, d.FetchWait)
	pos(&o.ShutdownTimeout, d.ShutdownTimeout)
	pos(&o.StatsInterval, d.StatsInterval)
	pos(&o.ReconcileInterval, d.ReconcileInterval)
	pos(&o.FreshFor, d.FreshFor)
	if o.MaxAckPending <= 0 {
		o.MaxAckPending = d.MaxAckPending
	}
	if o.Workers <= 0 {
		o.Workers = d.Workers
	}
}

// HookConsumer is the name of the delivery consumer of subscription id.
func (o Options) HookConsumer(id int64) string {
	return o.DeliverConsumer + "-" + strconv.FormatInt(id, 10)
}

// DueSubject is the subject of subscription id's due jobs on EventsStream.
func (o Options) DueSubject(id int64) string {
	return o.DueSubjectPrefix + strconv.FormatInt(id, 10)
}

// HookFilters are the subjects the delivery consumer of s takes: the events it selects
// (every event when it selects all or is ordered), webhook.test (a test goes to its one subscription,
// whatever it selects) and its due jobs.
func (o Options) HookFilters(s app.Subscription) []string {
	if s.Events == nil || s.Ordered() {
		// An ordered subscription also passes over the events it does not take, so that
		// its packages' later events do not wait for them.
		return []string{o.EventsFilter, o.DueSubject(s.ID)}
	}
	prefix := strings.TrimSuffix(o.EventsFilter, ">")
	subjects := []string{prefix + events.TypeWebhookTest}
	for _, t := range s.Events {
		subjects = append(subjects, prefix+t)
	}
	slices.Sort(subjects)
	return append(slices.Compact(subjects), o.DueSubject(s.ID))
}

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
	Order   *app.Order
	Health  *app.Health
	Metrics *app.Metrics
	Log     *slog.Logger
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

	// The runtimes settling the messages of the delivery (every subscription's), retry
	// and queued consumers.
	deliver, retry, queued *consumer.Runtime
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
	return d
}

// Options returns the dispatcher's options with defaults filled in.
func (d *Dispatcher) Options() Options { return d.opts }

// EnsureConsumers creates the durable retry and queued consumers, or updates them to
// the current configuration, after deleting the consumers of earlier versions whose
// filters overlap theirs on the work-queue stream (the shared delivery consumer, and
// the per-subscription job consumers before the one hop: their queued jobs stay on the
// stream and the queued consumer moves them). Every instance calls it at start; they
// share the consumers. Requests a NATS cluster drops or refuses for a while are retried
// (events.EnsureConsumer).
func (d *Dispatcher) EnsureConsumers(ctx context.Context) (retry, queued jetstream.Consumer, err error) {
	old := []string{d.opts.DeliverConsumer}
	if stream, err := d.js.Stream(ctx, d.opts.JobsStream); err == nil {
		names := stream.ConsumerNames(ctx)
		for name := range names.Name() {
			if _, ok := d.hookOf(name); ok {
				old = append(old, name)
			}
		}
		if err := names.Err(); err != nil {
			return nil, nil, fmt.Errorf("list the consumers of %s: %w", d.opts.JobsStream, err)
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil, fmt.Errorf("stream %s: %w", d.opts.JobsStream, err)
	}
	for _, name := range old {
		if err := d.js.DeleteConsumer(ctx, d.opts.JobsStream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, nil, fmt.Errorf("delete the job consumer %s of an earlier version: %w", name, err)
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
		return nil, nil, err
	}
	if queued, err = jobConsumer(d.opts.QueuedConsumer, "webhook dispatcher: moves redeliveries to their subscription's due jobs",
		d.opts.JobSubjectPrefix+"*", 1000); err != nil {
		return nil, nil, err
	}
	return retry, queued, nil
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

// hookConsumer is this instance's pull of one subscription's delivery consumer, and
// the worker goroutines that attempt its messages (events and due jobs).
//
// A subscription's messages run on workers of its own, started as its messages need
// them (up to min(max_in_flight, Workers), the most JetStream hands this instance at
// once) and kept until the subscription's consumer stops, instead of a new goroutine per
// message: a new goroutine starts on a small stack and grows it in every attempt (the
// HTTP client's call chain is deep), which cost 5-7 % of the dispatcher's CPU. A slow
// receiver's messages wait only for its own workers, as they wait only for its own
// consumer.
type hookConsumer struct {
	id          int64
	maxInFlight int
	filters     []string
	cc          jetstream.ConsumeContext

	// jobs hands a message to a worker that waits for one: unbuffered, so a send
	// succeeds only when a worker has taken it (no message sits in a buffer).
	jobs chan hookMsg
	// stop is closed when the subscription's consumer is removed: its workers end.
	stop chan struct{}
	// cap is the most workers (min(max_in_flight, Workers)); started, how many run.
	cap     atomic.Int32
	mu      sync.Mutex
	started int32
}

// hookMsg is a message of a subscription's delivery consumer, with the subscription's id.
type hookMsg struct {
	jetstream.Msg
	hook int64
}

// newHookConsumer returns a hook consumer, without workers yet, for subscription s.
func (d *Dispatcher) newHookConsumer(s app.Subscription, filters []string) *hookConsumer {
	h := &hookConsumer{id: s.ID, filters: filters, jobs: make(chan hookMsg), stop: make(chan struct{})}
	h.setCap(s.MaxInFlight, d.opts.Workers)
	return h
}

// setCap sets the most workers from the subscription's max_in_flight. Workers started
// under a larger cap stay (idle): JetStream hands out no more than max_in_flight.
func (h *hookConsumer) setCap(maxInFlight, workers int) {
	h.maxInFlight = maxInFlight
	h.cap.Store(int32(max(1, min(maxInFlight, workers))))
}

// startWorker counts one more worker if fewer than cap run.
func (h *hookConsumer) startWorker() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started >= h.cap.Load() {
		return false
	}
	h.started++
	return true
}

// Run ensures the consumers and runs the delivery consumers of every subscription, the
// retry and queued loops, the subscription listener, the health pass and the gauge
// refresher until ctx is done. Then it stops fetching and lets in-flight work finish
// within ShutdownTimeout; attempts still running after that are abandoned and their
// messages returned to the queue. It returns nil after a clean stop.
func (d *Dispatcher) Run(ctx context.Context) error {
	defer d.settler.Close() // on every return; after a clean stop it is closed below
	retryCons, queuedCons, err := d.EnsureConsumers(ctx)
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

// dispatch hands one message of subscription h to one of its workers: one that waits
// for a message, else a new one if fewer than its cap run, else the first that is done
// with its message (the subscription's consumer waits meanwhile; only its own messages
// do). It runs on the consumer's callback, one message at a time per subscription.
func (d *Dispatcher) dispatch(ctx, workCtx context.Context, h *hookConsumer, msg jetstream.Msg) {
	if ctx.Err() != nil {
		consumer.HandBack(msg) // stopping: hand it to another instance at once
		return
	}
	m := hookMsg{Msg: msg, hook: h.id}
	select {
	case h.jobs <- m:
		return
	default:
	}
	if h.startWorker() {
		d.inflight.Go(func() { d.work(ctx, workCtx, h, m) })
		return
	}
	select {
	case h.jobs <- m:
	case <-ctx.Done():
		consumer.HandBack(msg)
	case <-h.stop:
		consumer.HandBack(msg)
	}
}

// work is one worker of subscription h: it attempts msg, then each message handed to
// it, until the dispatcher stops or the subscription's consumer is removed.
func (d *Dispatcher) work(ctx, workCtx context.Context, h *hookConsumer, msg hookMsg) {
	for {
		d.attempt(ctx, workCtx, msg)
		select {
		case msg = <-h.jobs:
		case <-ctx.Done():
			return
		case <-h.stop:
			return
		}
	}
}

// attempt handles one message once the instance has a free slot of its Workers.
func (d *Dispatcher) attempt(ctx, workCtx context.Context, msg hookMsg) {
	select {
	case d.sem <- struct{}{}:
	case <-ctx.Done():
		consumer.HandBack(msg.Msg)
		return
	}
	defer func() { <-d.sem }()
	if ctx.Err() != nil {
		consumer.HandBack(msg.Msg) // stopping: hand it to another instance at once
		return
	}
	d.deliver.Process(workCtx, msg)
}

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
		case errors.Is(err, app.ErrPoison):
			return consumer.Poison(err.Error())
		case err != nil:
			return consumer.Failed(err) // after the back-off
		case job == nil:
			return d.passOver(ctx, msg, hm.hook, ack.streamSeq) // not for this subscription
		}
		seenBefore = time.Since(ack.stored) > d.opts.FreshFor
	}
	err = d.p.Deliverer.DeliverJob(ctx, job, ack.delivered, seenBefore)
	var again *app.RetryError
	switch {
	case err == nil:
		return consumer.Acked()
	case errors.Is(err, app.ErrPoison):
		return consumer.Poison(err.Error())
	case !errors.As(err, &again):
		return consumer.Failed(err) // not a delivery's error: after the back-off
	case again.Delay <= 0:
		return consumer.NakAfter(0)
	}
	if err := d.scheduleRetry(ctx, job, ack.streamSeq, time.Now().Add(again.Delay)); err != nil {
		d.log.Warn("move webhook job to the retry queue; it waits on its own consumer", "delivery_id", job.GetDeliveryId(), "err", err)
		return consumer.NakAfter(again.Delay)
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
	_, err = d.js.Publish(pctx, d.opts.DueSubject(job.GetHookId()), msg.Data(),
		jetstream.WithMsgID(fmt.Sprintf("%s:due:%d", job.GetDeliveryId(), md.Sequence.Stream)))
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("move webhook job to its due subject", "delivery_id", job.GetDeliveryId(), "err", err)
		}
		return consumer.NakAfter(time.Second)
	}
	return consumer.Acked()
}

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

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
