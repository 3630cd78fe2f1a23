package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fetchRetryDelay is how long Pull waits after a failed fetch.
const fetchRetryDelay = time.Second

// Options configure a Runtime.
type Options struct {
	// Name of the consumer in logs and metrics (its durable name).
	Name string
	// Log receives the runtime's and the middleware's lines.
	Log *slog.Logger
	// Metrics, shared by the consumers of a process; nil: none.
	Metrics *Metrics
	// KeepAlive is the interval of InProgress while a handler runs (usually AckWait/2);
	// 0: none.
	KeepAlive time.Duration
	// Backoff gives the delay of a Retry decision from the delivery count; nil:
	// backoff.TransientDelay.
	Backoff func(numDelivered uint64) time.Duration
	// OnPoison records why a message was terminated, besides the log line; nil: only
	// the log.
	OnPoison PoisonFunc
	// Middleware are more middleware, run inside the standard ones (the first
	// outermost), right around the handler.
	Middleware []Middleware
	// Settler, when set, settles the handled messages (Process queues them to it), so
	// that the acknowledgements of concurrent handlers leave together; nil: Process
	// settles each message itself before it returns.
	Settler *Settler
}

// Runtime runs one consumer's handler inside the standard middleware and settles what
// it decides. It is safe for concurrent use.
type Runtime struct {
	name    string
	log     *slog.Logger
	chain   BatchHandler
	settler *Settler
}

// New returns the runtime of h. The chain, outermost first: Instrument (metrics),
// Poisoned (log and record a Term), Logged (a Nak or Retry with a reason), Backoff
// (Retry → Nak after the back-off), Recover (a panic → Retry), KeepAlive, then
// o.Middleware and h.
func New(h BatchHandler, o Options) *Runtime {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mws := []Middleware{
		Instrument(o.Metrics, o.Name),
		Poisoned(log, o.Name, o.OnPoison),
		Logged(log, o.Name),
		Backoff(o.Backoff),
		complete,
		Recover(log, o.Name),
		KeepAlive(o.KeepAlive),
	}
	mws = append(mws, o.Middleware...)
	return &Runtime{name: o.Name, log: log, chain: Chain(h, mws...), settler: o.Settler}
}

// NewSingle returns the runtime of a handler of one message at a time.
func NewSingle(h Handler, o Options) *Runtime { return New(Single(h), o) }

// Name is the consumer's name.
func (r *Runtime) Name() string { return r.name }

// Process runs the chain on msgs (with the work context ctx) and settles each message
// as decided (or queues it to the runtime's Settler). It returns the decisions. Each
// message is handled in a span, a child of the trace context in its headers (see
// startSpans).
func (r *Runtime) Process(ctx context.Context, msgs ...jetstream.Msg) []Decision {
	if len(msgs) == 0 {
		return nil
	}
	ctx, spans := startSpans(ctx, r.name, msgs)
	out := r.chain(ctx, msgs)
	endSpans(spans, out)
	if r.settler != nil {
		for i, msg := range msgs {
			r.settler.Settle(msg, out[i])
		}
		return out
	}
	for i, msg := range msgs {
		settleOrLog(r.log, r.name, msg, out[i])
	}
	return out
}

// settleOrLog settles msg as d says, logging (not returning) a failure: the message is
// then handed out again after its AckWait.
func settleOrLog(log *slog.Logger, consumer string, msg jetstream.Msg, d Decision) {
	if err := Settle(msg, d); err != nil {
		log.Warn("settle message", "consumer", consumer, "subject", msg.Subject(), "action", d.Action.String(), "err", err)
	}
}

// Fetcher is the part of a jetstream.Consumer that Pull uses.
type Fetcher interface {
	Fetch(batch int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error)
	FetchNoWait(batch int) (jetstream.MessageBatch, error)
}

var _ Fetcher = (jetstream.Consumer)(nil)

// PullOptions tune one fetch loop.
type PullOptions struct {
	// Batch is the most messages one fetch takes (default 1). A worker that fetches one
	// message at a time lets no message wait in its buffer while its AckWait runs.
	Batch int
	// Wait is how long one fetch waits for messages; also the longest a stopping loop
	// waits for its fetch (default 2s).
	Wait time.Duration
	// Together hands each fetched batch to the handler at once (a batch handler that
	// group-commits); otherwise the messages are processed one by one. A together
	// loop's fetch waits for the first message only and takes the rest that are there
	// (FetchNoWait), so a lone message is not held back for Wait.
	Together bool
	// Linger, for a together loop, is how long it lets messages gather when others were
	// waiting beside the first (a busy queue) before it takes the rest: fewer, larger
	// batches under load for a handler whose cost is per batch (a commit) and whose
	// messages may wait that long; a lone message is not held back.
	Linger time.Duration
}

// Pull fetches from cons and processes what it gets with the work context workCtx,
// until ctx is done. A message fetched once ctx is done is not handled but handed
// back at once (Nak), for another instance. A fetch that fails for another reason
// than an empty queue is logged and retried after a second.
func (r *Runtime) Pull(ctx, workCtx context.Context, cons Fetcher, o PullOptions) {
	if o.Batch < 1 {
		o.Batch = 1
	}
	if o.Wait <= 0 {
		o.Wait = 2 * time.Second
	}
	for ctx.Err() == nil {
		msgs, err := fetch(ctx, cons, o)
		switch {
		case len(msgs) == 0:
		case ctx.Err() != nil:
			// Stopping: hand them to another instance at once.
			HandBack(msgs...)
		case o.Together:
			r.Process(workCtx, msgs...)
		default:
			for i, msg := range msgs {
				if ctx.Err() != nil {
					HandBack(msgs[i:]...)
					break
				}
				r.Process(workCtx, msg)
			}
		}
		if err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			r.log.Warn("fetch", "consumer", r.name, "err", err)
			sleep(ctx, fetchRetryDelay)
		}
	}
}

// fetch takes one batch: Batch messages waiting up to Wait, or for a together loop
// the first message waiting up to Wait and then what else is there (after Linger,
// when others were there already).
func fetch(ctx context.Context, cons Fetcher, o PullOptions) ([]jetstream.Msg, error) {
	n := o.Batch
	if o.Together {
		n = 1
	}
	var msgs []jetstream.Msg
	b, err := cons.Fetch(n, jetstream.FetchMaxWait(o.Wait))
	if err != nil {
		return nil, err
	}
	for m := range b.Messages() {
		msgs = append(msgs, m)
	}
	err = b.Error()
	if o.Together && len(msgs) > 0 && o.Batch > 1 {
		n := len(msgs)
		msgs = fetchNoWait(cons, o.Batch-len(msgs), msgs)
		if o.Linger > 0 && len(msgs) > n && len(msgs) < o.Batch {
			sleep(ctx, o.Linger)
			msgs = fetchNoWait(cons, o.Batch-len(msgs), msgs)
		}
	}
	return msgs, err
}

// Drain processes, batch messages at a time, what is waiting on cons until nothing is
// left, ctx is done, or a message of a batch is not settled for good (Ack or Term: its
// handler's dependency fails, so what remains is left to another consumer): a stopping
// process's last pass over a queue it alone may be serving.
func (r *Runtime) Drain(ctx context.Context, cons Fetcher, batch int) {
	for ctx.Err() == nil {
		msgs := fetchNoWait(cons, batch, nil)
		if len(msgs) == 0 {
			return
		}
		for _, d := range r.Process(ctx, msgs...) {
			if d.Action != Ack && d.Action != Term {
				return
			}
		}
	}
}

// fetchNoWait appends to msgs up to n messages that are there.
func fetchNoWait(cons Fetcher, n int, msgs []jetstream.Msg) []jetstream.Msg {
	if more, err := cons.FetchNoWait(n); err == nil {
		for m := range more.Messages() {
			msgs = append(msgs, m)
		}
	}
	return msgs
}

// HandBack returns messages at once (Nak) without handling them, for another
// instance: what a stopping consumer does with messages it was handed.
func HandBack(msgs ...jetstream.Msg) {
	for _, m := range msgs {
		_ = m.Nak()
	}
}

// Group runs a consumer's loops and gives the work they started a grace period when
// it stops: loops stop fetching when ctx is done, while their handlers run on the work
// context, which is cancelled only once the grace period is over.
type Group struct {
	ctx        context.Context
	work       context.Context
	cancelWork context.CancelFunc
	wg         sync.WaitGroup
}

// NewGroup returns a group whose loops stop with ctx.
func NewGroup(ctx context.Context) *Group {
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &Group{ctx: ctx, work: work, cancelWork: cancel}
}

// Work is the context handlers run with: it outlives ctx by the grace period.
func (g *Group) Work() context.Context { return g.work }

// Go runs fn in the group.
func (g *Group) Go(fn func()) { g.wg.Go(fn) }

// Pull runs r.Pull on cons in the group, workers times.
func (g *Group) Pull(r *Runtime, cons Fetcher, workers int, o PullOptions) {
	for range max(1, workers) {
		g.Go(func() { r.Pull(g.ctx, g.work, cons, o) })
	}
}

// Wait waits until ctx is done and every function of the group has returned. If they
// have not within grace after ctx is done, it cancels the work context (abandoned
// messages go back to the queue after their AckWait, or at once when the handler
// returns a Nak) and waits for them; it then reports true.
func (g *Group) Wait(grace time.Duration) (abandoned bool) {
	<-g.ctx.Done()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	defer g.cancelWork()
	select {
	case <-done:
		return false
	case <-time.After(grace):
	}
	g.cancelWork()
	<-done
	return true
}

// Every calls fn at once and then every interval until ctx is done, each call with a
// context bounded by the interval (for gauges refreshed from a server).
func Every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, interval)
		fn(cctx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
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
