package transport

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

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
