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
	FanoutConsumer = "webhooks-fanout"
	// DeliverConsumer names the delivery consumers: one per subscription,
	// DeliverConsumer + "-" + its id. (Before 00007 it was one shared consumer of that
	// name; Run deletes it.)
	DeliverConsumer = "webhooks-deliver"
	// RetryConsumer holds the jobs waiting for their next attempt.
	RetryConsumer = "webhooks-retry"
)

// HeaderNotBefore is the header of a job waiting on the retry subject: Unix
// milliseconds before which its next attempt must not start.
const HeaderNotBefore = "Shipfile-Not-Before"

// Options name the streams, subjects and consumers the dispatcher uses and tune its
// loops. DefaultOptions has the production names; tests give each run its own.
type Options struct {
	EventsStream   string // SHIPFILE_EVENTS
	EventsFilter   string // shipfile.events.>
	FanoutConsumer string // webhooks-fanout

	JobsStream       string // SHIPFILE_WEBHOOKS
	JobsFilter       string // shipfile.webhooks.> (the pre-00007 shared consumer's filter)
	JobSubjectPrefix string // shipfile.webhooks. (then the hook id)
	DeliverConsumer  string // webhooks-deliver (then "-" and the hook id)
	// RetrySubjectPrefix starts the subjects of jobs waiting for their next attempt
	// (then the hook id); default JobSubjectPrefix + "retry.".
	RetrySubjectPrefix string
	RetryConsumer      string // webhooks-retry

	// AckWait of the delivery consumers: longer than one attempt (timeout + margin).
	// A handler also reports progress every AckWait/2. A killed instance's slots of a
	// subscription's max_in_flight come back after AckWait.
	AckWait time.Duration
	// FanoutAckWait is the AckWait of the fan-out consumer (default 30s).
	FanoutAckWait time.Duration
	// MaxAckPending of the retry consumer: jobs waiting for their next attempt, across
	// all instances (default 100000; when reached, new retries wait).
	MaxAckPending int
	// Workers caps the attempts in flight in this instance, all subscriptions together
	// (default 256); each subscription also has its own cap (max_in_flight).
	Workers int
	// FanoutBatch is how many events one fan-out takes at most (default 64).
	FanoutBatch int
	// FetchWait is how long one fetch waits for messages; also the longest a stopping
	// dispatcher waits for its fetches (default 2s).
	FetchWait time.Duration
	// ShutdownTimeout is how long in-flight work may finish once Run's context is done;
	// then attempts are abandoned and their jobs go back to the queue (default 20s).
	ShutdownTimeout time.Duration
	// StatsInterval is the refresh period of the queue gauges (default 5s).
	StatsInterval time.Duration
	// ReconcileInterval is how often the delivery consumers are checked against the
	// subscriptions without a pushed change (default 30s).
	ReconcileInterval time.Duration
	// Metrics of the consumer runtime, shared by the process's consumers; nil: none.
	Metrics *consumer.Metrics
}

// DefaultOptions returns the production names and defaults.
func DefaultOptions() Options {
	return Options{
		EventsStream:      events.StreamEvents,
		EventsFilter:      events.SubjectPrefix + ">",
		FanoutConsumer:    FanoutConsumer,
		JobsStream:        events.StreamWebhooks,
		JobsFilter:        events.WebhookSubjectPrefix + ">",
		JobSubjectPrefix:  events.WebhookSubjectPrefix,
		DeliverConsumer:   DeliverConsumer,
		RetryConsumer:     RetryConsumer,
		AckWait:           15 * time.Second,
		FanoutAckWait:     30 * time.Second,
		MaxAckPending:     100000,
		Workers:           256,
		FanoutBatch:       64,
		FetchWait:         2 * time.Second,
		ShutdownTimeout:   20 * time.Second,
		StatsInterval:     5 * time.Second,
		ReconcileInterval: 30 * time.Second,
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
	set(&o.RetrySubjectPrefix, o.JobSubjectPrefix+"retry.")
	set(&o.RetryConsumer, d.RetryConsumer)
	pos := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	pos(&o.AckWait, d.AckWait)
	pos(&o.FanoutAckWait, d.FanoutAckWait)
	pos(&o.FetchWait, d.FetchWait)
	pos(&o.ShutdownTimeout, d.ShutdownTimeout)
	pos(&o.StatsInterval, d.StatsInterval)
	pos(&o.ReconcileInterval, d.ReconcileInterval)
	if o.MaxAckPending <= 0 {
		o.MaxAckPending = d.MaxAckPending
	}
	if o.Workers <= 0 {
		o.Workers = d.Workers
	}
	if o.FanoutBatch <= 0 {
		o.FanoutBatch = d.FanoutBatch
	}
}

// HookConsumer is the name of the delivery consumer of subscription id.
func (o Options) HookConsumer(id int64) string {
	return o.DeliverConsumer + "-" + strconv.FormatInt(id, 10)
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

// PublishJobs publishes the jobs asynchronously, each with its MsgID as Nats-Msg-Id
// (a job published again is dropped by the stream's duplicate window), and waits until
// the stream has acknowledged every one.
func (p *JobPublisher) PublishJobs(ctx context.Context, jobs []app.Job) error {
	futures := make([]jetstream.PubAckFuture, 0, len(jobs))
	var errs []error
	for _, j := range jobs {
		msg, err := events.WebhookJobMessage(j.Job, j.MsgID)
		if err != nil {
			return err
		}
		subject := p.prefix + strconv.FormatInt(j.Job.GetHookId(), 10)
		f, err := p.js.PublishAsync(subject, msg.Data, jetstream.WithMsgID(msg.ID))
		if err != nil {
			errs = append(errs, fmt.Errorf("publish webhook job on %s: %w", subject, err))
			break
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs = append(errs, fmt.Errorf("publish webhook job on %s: %w", f.Msg().Subject, err))
		case <-ctx.Done():
			return fmt.Errorf("publish webhook jobs: %w", ctx.Err())
		}
	}
	return errors.Join(errs...)
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
	Fanout        *app.Fanout
	Deliverer     *app.Deliverer
	Health        *app.Health
	Metrics       *app.Metrics
	Log           *slog.Logger
}

// Dispatcher runs the fan-out and the deliveries of one instance on the shared durable
// consumers: the fan-out consumer of package events, one delivery consumer per
// subscription (MaxAckPending = its max_in_flight, so the cap holds across every
// instance and a slow receiver holds up only its own consumer), and the retry consumer
// holding jobs until their next attempt is due.
type Dispatcher struct {
	js   jetstream.JetStream
	p    Parts
	log  *slog.Logger
	opts Options

	sem      chan struct{} // the instance's attempts in flight (Workers)
	inflight sync.WaitGroup

	// The runtimes settling the messages of the fan-out, delivery (every
	// subscription's) and retry consumers.
	fanout, deliver, retry *consumer.Runtime
	// settler acknowledges the delivery consumers' jobs: those of one group commit
	// together (one write to NATS instead of one per job).
	settler *consumer.Settler
}

// NewDispatcher returns a Dispatcher; Run starts it.
func NewDispatcher(js jetstream.JetStream, p Parts, opts Options) *Dispatcher {
	opts.defaults()
	d := &Dispatcher{js: js, p: p, log: p.Log, opts: opts, sem: make(chan struct{}, opts.Workers)}
	d.fanout = consumer.New(d.handleEvents, consumer.Options{Name: opts.FanoutConsumer, Log: p.Log, Metrics: opts.Metrics})
	d.settler = consumer.NewSettler(opts.DeliverConsumer, p.Log)
	d.deliver = consumer.NewSingle(d.handleJob, consumer.Options{
		Name: opts.DeliverConsumer, Log: p.Log, Metrics: opts.Metrics,
		KeepAlive: opts.AckWait / 2, // an attempt reports progress while it runs long
		Settler:   d.settler,
	})
	d.retry = consumer.NewSingle(d.handleRetry, consumer.Options{Name: opts.RetryConsumer, Log: p.Log, Metrics: opts.Metrics})
	return d
}

// Options returns the dispatcher's options with defaults filled in.
func (d *Dispatcher) Options() Options { return d.opts }

// EnsureConsumers creates the durable fan-out and retry consumers, or updates them to
// the current configuration, and deletes the shared delivery consumer of the versions
// before per-subscription consumers (its filter would overlap theirs on the work-queue
// stream). Every instance calls it at start; they share the consumers. Requests a NATS
// cluster drops or refuses for a while are retried (events.EnsureConsumer).
func (d *Dispatcher) EnsureConsumers(ctx context.Context) (fanout, retry jetstream.Consumer, err error) {
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
	if err := d.js.DeleteConsumer(ctx, d.opts.JobsStream, d.opts.DeliverConsumer); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, nil, fmt.Errorf("delete the shared delivery consumer %s: %w", d.opts.DeliverConsumer, err)
	}
	retry, err = events.EnsureConsumer(ctx, d.js, d.opts.JobsStream, jetstream.ConsumerConfig{
		Durable:       d.opts.RetryConsumer,
		Description:   "webhook dispatcher: holds delivery jobs until their next attempt",
		FilterSubject: d.opts.RetrySubjectPrefix + ">",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
		MaxAckPending: d.opts.MaxAckPending,
	})
	if err != nil {
		return nil, nil, err
	}
	return fanout, retry, nil
}

// hookConsumer is this instance's pull of one subscription's delivery consumer, and
// the worker goroutines that attempt its jobs.
//
// A subscription's jobs run on workers of its own, started as its jobs need them (up to
// min(max_in_flight, Workers), the most JetStream hands this instance at once) and kept
// until the subscription's consumer stops, instead of a new goroutine per job: a new
// goroutine starts on a small stack and grows it in every attempt (the HTTP client's
// call chain is deep), which cost 5-7 % of the dispatcher's CPU. A slow receiver's jobs
// wait only for its own workers, as they waited only for its own consumer before.
type hookConsumer struct {
	maxInFlight int
	cc          jetstream.ConsumeContext

	// jobs hands a job to a worker that waits for one: unbuffered, so a send succeeds
	// only when a worker has taken the job (no job sits in a buffer).
	jobs chan jetstream.Msg
	// stop is closed when the subscription's consumer is removed: its workers end.
	stop chan struct{}
	// cap is the most workers (min(max_in_flight, Workers)); started, how many run.
	cap     atomic.Int32
	mu      sync.Mutex
	started int32
}

// newHookConsumer returns a hook consumer, without workers yet, for a subscription with
// this max_in_flight.
func (d *Dispatcher) newHookConsumer(maxInFlight int) *hookConsumer {
	h := &hookConsumer{maxInFlight: maxInFlight, jobs: make(chan jetstream.Msg), stop: make(chan struct{})}
	h.setCap(maxInFlight, d.opts.Workers)
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

// Run ensures the consumers and runs the fan-out loop, the delivery consumers of every
// subscription, the retry loop, the subscription listener, the health pass and the
// gauge refresher until ctx is done. Then it stops fetching and lets in-flight work
// finish within ShutdownTimeout; attempts still running after that are abandoned and
// their jobs returned to the queue. It returns nil after a clean stop.
func (d *Dispatcher) Run(ctx context.Context) error {
	defer d.settler.Close() // on every return; after a clean stop it is closed below
	fanoutCons, retryCons, err := d.EnsureConsumers(ctx)
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
	// The fan-out fetches events in batches (the first waits, the rest are what is
	// there) and fans each batch out together.
	g.Pull(d.fanout, fanoutCons, 1, consumer.PullOptions{Batch: d.opts.FanoutBatch, Wait: d.opts.FetchWait, Together: true})
	g.Pull(d.retry, retryCons, 1, consumer.PullOptions{Batch: 256, Wait: d.opts.FetchWait})
	g.Go(func() { consumer.Every(ctx, d.opts.StatsInterval, d.refreshStats) })
	g.Go(func() { consumer.Every(ctx, d.p.Health.Interval(), d.p.Health.Pass) })
	g.Go(func() { consumer.Every(ctx, d.p.Health.Interval(), d.p.Health.Heartbeat) })

	hooks := map[int64]*hookConsumer{}
	d.reconcile(ctx, workCtx, hooks, true)
	d.log.Info("dispatcher running", "workers", d.opts.Workers, "subscriptions", len(hooks),
		"fanout_consumer", d.opts.FanoutConsumer, "deliver_consumers", d.opts.DeliverConsumer+"-<hook id>")
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
	d.settler.Close() // the jobs handled last are settled
	d.p.Deliverer.Close()
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
// updating its MaxAckPending to max_in_flight, and removes the consumers and queued
// jobs of subscriptions that are gone (first: those left over while no instance ran).
func (d *Dispatcher) reconcile(ctx, workCtx context.Context, hooks map[int64]*hookConsumer, first bool) {
	present := map[int64]bool{}
	for _, s := range d.p.Subscriptions.All() {
		present[s.ID] = true
		h := hooks[s.ID]
		if h != nil && h.maxInFlight == s.MaxInFlight {
			continue
		}
		cons, err := events.EnsureConsumer(ctx, d.js, d.opts.JobsStream, d.hookConsumerConfig(s))
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("delivery consumer", "hook_id", s.ID, "err", err)
			}
			continue
		}
		if h != nil {
			h.setCap(s.MaxInFlight, d.opts.Workers)
			continue
		}
		h = d.newHookConsumer(s.MaxInFlight)
		cc, err := cons.Consume(func(msg jetstream.Msg) { d.dispatch(ctx, workCtx, h, msg) },
			jetstream.PullMaxMessages(max(1, min(s.MaxInFlight, d.opts.Workers))),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrNoHeartbeat) {
					d.log.Debug("delivery consumer", "hook_id", s.ID, "err", err)
				}
			}))
		if err != nil {
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
	if !first {
		return
	}
	stream, err := d.js.Stream(ctx, d.opts.JobsStream)
	if err != nil {
		return
	}
	names := stream.ConsumerNames(ctx)
	for name := range names.Name() {
		rest, ok := strings.CutPrefix(name, d.opts.DeliverConsumer+"-")
		if !ok {
			continue
		}
		if id, err := strconv.ParseInt(rest, 10, 64); err == nil && !present[id] {
			if _, err := d.p.Subscriptions.Get(ctx, id); errors.Is(err, app.ErrNotFound) {
				d.removeHook(ctx, id)
			}
		}
	}
}

// hookConsumerConfig is the delivery consumer of subscription s, the same from every
// instance.
func (d *Dispatcher) hookConsumerConfig(s app.Subscription) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       d.opts.HookConsumer(s.ID),
		Description:   "webhook dispatcher: delivers the jobs of subscription " + strconv.FormatInt(s.ID, 10),
		FilterSubject: d.opts.JobSubjectPrefix + strconv.FormatInt(s.ID, 10),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       d.opts.AckWait,
		MaxDeliver:    -1,
		// max_in_flight across every instance: the server hands out no more jobs while
		// that many are unacknowledged; a killed instance's come back after AckWait.
		MaxAckPending: max(1, s.MaxInFlight),
	}
}

// removeHook deletes a deleted subscription's delivery consumer and its queued jobs.
func (d *Dispatcher) removeHook(ctx context.Context, id int64) {
	if err := d.js.DeleteConsumer(ctx, d.opts.JobsStream, d.opts.HookConsumer(id)); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		d.log.Warn("delete delivery consumer", "hook_id", id, "err", err)
	}
	stream, err := d.js.Stream(ctx, d.opts.JobsStream)
	if err == nil {
		err = stream.Purge(ctx, jetstream.WithPurgeSubject(d.opts.JobSubjectPrefix+strconv.FormatInt(id, 10)))
	}
	if err != nil && ctx.Err() == nil {
		d.log.Warn("purge jobs of a deleted subscription", "hook_id", id, "err", err)
	}
	d.log.Info("subscription deleted; its delivery consumer and jobs removed", "hook_id", id)
}

// dispatch hands one job of subscription h to one of its workers: one that waits for a
// job, else a new one if fewer than its cap run, else the first that is done with its
// job (the subscription's consumer waits meanwhile; only its own jobs do). It runs on
// the consumer's callback, one job at a time per subscription.
func (d *Dispatcher) dispatch(ctx, workCtx context.Context, h *hookConsumer, msg jetstream.Msg) {
	if ctx.Err() != nil {
		consumer.HandBack(msg) // stopping: hand it to another instance at once
		return
	}
	select {
	case h.jobs <- msg:
		return
	default:
	}
	if h.startWorker() {
		d.inflight.Go(func() { d.work(ctx, workCtx, h, msg) })
		return
	}
	select {
	case h.jobs <- msg:
	case <-ctx.Done():
		consumer.HandBack(msg)
	case <-h.stop:
		consumer.HandBack(msg)
	}
}

// work is one worker of subscription h: it attempts msg, then each job handed to it,
// until the dispatcher stops or the subscription's consumer is removed.
func (d *Dispatcher) work(ctx, workCtx context.Context, h *hookConsumer, msg jetstream.Msg) {
	for {
		d.attempt(ctx, workCtx, msg)
		msg = nil
		select {
		case msg = <-h.jobs:
		case <-ctx.Done():
			return
		case <-h.stop:
			return
		}
	}
}

// attempt handles one job once the instance has a free slot of its Workers.
func (d *Dispatcher) attempt(ctx, workCtx context.Context, msg jetstream.Msg) {
	select {
	case d.sem <- struct{}{}:
	case <-ctx.Done():
		consumer.HandBack(msg)
		return
	}
	defer func() { <-d.sem }()
	if ctx.Err() != nil {
		consumer.HandBack(msg) // stopping: hand it to another instance at once
		return
	}
	d.deliver.Process(workCtx, msg)
}

// handleEvents fans a batch of events out: each is acknowledged once its jobs are
// queued, terminated when malformed, or tried again after a back-off.
func (d *Dispatcher) handleEvents(ctx context.Context, msgs []jetstream.Msg) []consumer.Decision {
	hctx, cancel := context.WithTimeout(ctx, d.opts.FanoutAckWait*2/3)
	defer cancel()
	data := make([][]byte, len(msgs))
	for i, m := range msgs {
		data[i] = m.Data()
	}
	errs := d.p.Fanout.HandleBatch(hctx, data)
	out := make([]consumer.Decision, len(msgs))
	for i, err := range errs {
		switch {
		case err == nil:
			out[i] = consumer.Acked()
		case errors.Is(err, app.ErrPoison):
			out[i] = consumer.Poison(err.Error())
		default:
			out[i] = consumer.Failed(fmt.Errorf("fan-out: %w", err))
		}
	}
	return out
}

// handleJob delivers one job, reporting progress while the attempt runs long, and
// turns what the delivery returned into the message's fate: done (nil) → Ack, poison →
// Term, a retry → Nak at once or, after a delay, a move to the retry subject, so that
// while it waits it holds no slot of its subscription's max_in_flight.
func (d *Dispatcher) handleJob(ctx context.Context, msg jetstream.Msg) consumer.Decision {
	err := d.p.Deliverer.Deliver(ctx, msg.Data(), numDelivered(msg))
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
	if err := d.scheduleRetry(ctx, msg, time.Now().Add(again.Delay)); err != nil {
		d.log.Warn("move webhook job to the retry queue; it waits on its own consumer", "subject", msg.Subject(), "err", err)
		return consumer.NakAfter(again.Delay)
	}
	return consumer.Acked()
}

// scheduleRetry publishes msg's job on the retry subject, due at notBefore. Its
// Nats-Msg-Id is derived from the job message's stream sequence, so a job handled
// again after a crash before its ack yields no second retry.
func (d *Dispatcher) scheduleRetry(ctx context.Context, msg jetstream.Msg, notBefore time.Time) error {
	job, err := events.UnmarshalWebhookJob(msg.Data())
	if err != nil {
		return err
	}
	md, err := msg.Metadata()
	if err != nil {
		return err
	}
	out := nats.NewMsg(d.opts.RetrySubjectPrefix + strconv.FormatInt(job.GetHookId(), 10))
	// The retry carries the ids only (not the fan-out's event and body): its attempt
	// reads the row, whose round and state the first attempt changed.
	if out.Data, err = proto.Marshal(&eventsv1.WebhookJob{DeliveryId: job.GetDeliveryId(), HookId: job.GetHookId()}); err != nil {
		return err
	}
	out.Header.Set(HeaderNotBefore, strconv.FormatInt(notBefore.UnixMilli(), 10))
	out.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s:retry:%d", job.GetDeliveryId(), md.Sequence.Stream))
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err = d.js.PublishMsg(pctx, out)
	return err
}

// handleRetry holds a waiting job until it is due (NakWithDelay), then queues it on its
// subscription's subject again and acknowledges it.
func (d *Dispatcher) handleRetry(ctx context.Context, msg jetstream.Msg) consumer.Decision {
	nb, _ := strconv.ParseInt(msg.Headers().Get(HeaderNotBefore), 10, 64)
	if wait := time.Until(time.UnixMilli(nb)); wait > 0 {
		return consumer.NakAfter(wait)
	}
	job, err := events.UnmarshalWebhookJob(msg.Data())
	if err != nil {
		return consumer.Poison(err.Error())
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
	_, err = d.js.Publish(pctx, d.opts.JobSubjectPrefix+strconv.FormatInt(job.GetHookId(), 10), msg.Data(),
		jetstream.WithMsgID(fmt.Sprintf("%s:due:%d", job.GetDeliveryId(), md.Sequence.Stream)))
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("requeue webhook job", "delivery_id", job.GetDeliveryId(), "err", err)
		}
		return consumer.NakAfter(time.Second)
	}
	return consumer.Acked()
}

// refreshStats refreshes the queue gauges, and removes the queued jobs of subscriptions
// that no longer exist (a fan-out that raced a deletion). The oldest pending delivery
// is the older of the oldest pending row (a delivery waiting for its next attempt, or
// redelivered) and the oldest job queued on a subscription's subject (a delivery has
// no row until its first attempt is committed).
func (d *Dispatcher) refreshStats(ctx context.Context) {
	var oldestJob time.Duration
	if stream, err := d.js.Stream(ctx, d.opts.JobsStream); err == nil {
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(d.opts.JobSubjectPrefix+"*"))
		if err == nil {
			d.p.Metrics.QueueDepth.Set(float64(info.State.Msgs))
			if info.State.Msgs > 0 {
				m, err := stream.GetMsg(ctx, info.State.FirstSeq, jetstream.WithGetMsgSubject(d.opts.JobSubjectPrefix+"*"))
				switch {
				case err == nil:
					oldestJob = max(0, time.Since(m.Time))
				case !errors.Is(err, jetstream.ErrMsgNotFound) && ctx.Err() == nil:
					d.log.Debug("oldest queued job", "err", err)
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
	if age, err := d.p.Deliverer.OldestPending(ctx); err == nil {
		d.p.Metrics.OldestPending.Set(max(age, oldestJob).Seconds())
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
