package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/shipfile/shipfile/pkg/clip"
	"github.com/shipfile/shipfile/pkg/tracing"
)

// Defaults of Options.
const (
	DefaultPollInterval = time.Second
	DefaultBatchSize    = 100
	DefaultRetention    = 24 * time.Hour
	DefaultLinger       = 5 * time.Millisecond
)

const (
	// maxCleanupInterval bounds how long published rows outlive Retention.
	maxCleanupInterval = 5 * time.Minute
	// cleanupChunk bounds one DELETE, keeping its locks and WAL burst short.
	cleanupChunk = 1000
	// Back-off between failed publish passes.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
	// publishWait bounds waiting for a batch's acknowledgements.
	publishWait = 10 * time.Second
	// markTimeout bounds recording a batch's outcome once ctx is cancelled.
	markTimeout = 10 * time.Second
	// pendingInterval is how often the pending gauges are refreshed at most.
	pendingInterval = time.Second
	// lastErrorMax bounds the stored error text.
	lastErrorMax = 1000
)

// Options tune a Relay. The zero value is usable.
type Options struct {
	// PollInterval is the fallback polling period, for rows whose writer did not wake
	// this relay: written by another process, or by one that crashed between its
	// commit and Wake (default DefaultPollInterval). Rows written in the relay's own
	// process are normally published as soon as their writer calls Wake.
	PollInterval time.Duration
	// BatchSize is how many rows one transaction publishes at most (default DefaultBatchSize).
	BatchSize int
	// Linger is the least time between the starts of two passes under load (default
	// DefaultLinger; negative: none). When two or more writers called Wake while the last
	// pass ran, a wake-up that comes sooner after that pass began waits for the rest of
	// Linger, so that a pass publishes the rows of many commits at once (each pass is a
	// transaction of its own, with its statements and its WAL flush); otherwise a
	// wake-up starts the next pass at once.
	Linger time.Duration
	// Retention is how long rows marked published stay in the table before they are
	// deleted (default DefaultRetention). This version deletes a row once it is
	// published; only rows marked by an earlier version (before migration 00025) wait.
	Retention time.Duration
	// Log receives the relay's warnings and errors; nil discards them. Payloads are
	// never logged: mail jobs carry secrets.
	Log *slog.Logger
	// Registerer, when set, gets the relay's metrics: shipfile_outbox_published_total,
	// shipfile_outbox_batches_total, shipfile_outbox_publish_errors_total,
	// shipfile_outbox_pending and shipfile_outbox_oldest_pending_seconds.
	Registerer prometheus.Registerer
	// Open, when set, opens the payload of an ephemeral row before it is published:
	// its writer sealed it (a mail job's magic link is never readable in the table).
	// A row it cannot open (sealed under a key the relay lacks) is a failed publish:
	// it stays first in line, its error recorded, tried again with back-off. A relay
	// without Open (the expiry's, the scanner's: they write no ephemeral rows) leaves
	// ephemeral rows to one with it (the gateway's), as it would publish them sealed.
	Open func(payload []byte) ([]byte, error)
}

// Relay publishes committed outbox rows to JetStream. Several relays (one per gateway
// instance) may run against one database: each batch locks its rows with FOR UPDATE SKIP
// LOCKED, so they never publish the same row at once, and a row published again after a
// crash (published, but not yet deleted) is dropped by the stream's duplicate window.
type Relay struct {
	wake    chan struct{}
	wakes   atomic.Int64 // Wake calls since the current pass began
	passes  atomic.Int64 // passes run to their end (for the tests)
	pool    *pgxpool.Pool
	js      jetstream.JetStream
	opts    Options
	log     *slog.Logger
	metrics *metrics
}

// NewRelay returns a relay publishing the outbox rows of pool's database to js.
func NewRelay(pool *pgxpool.Pool, js jetstream.JetStream, opts Options) *Relay {
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.Linger == 0 {
		opts.Linger = DefaultLinger
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "outbox")
	// Its own JetStream context on the same connection, whose asynchronous publishes
	// give up after publishWait: one the server never answers would otherwise stay
	// pending in the context for good, and enough of them stall every later publish.
	if nc := js.Conn(); nc != nil {
		if own, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(publishWait)); err == nil {
			js = own
		}
	}
	return &Relay{
		wake:    make(chan struct{}, 1),
		pool:    pool,
		js:      js,
		opts:    opts,
		log:     log,
		metrics: newMetrics(opts.Registerer, log),
	}
}

// Wake tells the relay that rows were committed: a running relay starts a publishing
// pass at once, or, under load (two or more wake-ups came while its last pass ran, which
// began less than Linger ago), once Linger has passed since that pass began. It never
// blocks, and wake-ups that arrive during a pass are coalesced into one more pass.
// Writers call it after their transaction committed, never inside it.
func (r *Relay) Wake() {
	r.wakes.Add(1)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run publishes until ctx is cancelled, then returns nil. It is woken by Wake, and
// polls every PollInterval as a fallback. Failed publishes are recorded on the row
// (attempts, last_error), logged and retried with back-off; Run does not return them.
// Rows an earlier version marked published are deleted once older than Retention.
func (r *Relay) Run(ctx context.Context) error {
	poll := time.NewTicker(r.opts.PollInterval)
	defer poll.Stop()
	cleanupEvery := min(r.opts.Retention, maxCleanupInterval)
	nextCleanup := time.Now() // once at start, then every cleanupEvery
	backoff := newBackoff()
	var passStarted, gaugesAt time.Time

	for {
		passStarted = time.Now()
		r.wakes.Store(0)
		if time.Now().After(nextCleanup) {
			if _, err := r.cleanup(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("outbox: delete published rows", "err", err)
			}
			nextCleanup = time.Now().Add(cleanupEvery)
		}
		err := r.Flush(ctx)
		busy := r.wakes.Load() >= 2 // commits landed while the pass ran
		r.passes.Add(1)
		// The pending gauges count the table: once a second, not after every pass.
		if time.Since(gaugesAt) >= pendingInterval {
			r.updatePending(ctx)
			gaugesAt = time.Now()
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			// The failing row stays first in line; wait before trying it again.
			r.log.Error("outbox: publish", "err", err)
			if !sleep(ctx, backoff.next()) {
				return nil
			}
			continue
		}
		backoff.reset()
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
			// Under load, commits land while a pass runs: the next pass waits until
			// Linger after the last one began, taking what commits meanwhile with it.
			// At a low rate (fewer than two commits during the pass) it starts at
			// once: waiting would gather nothing.
			if wait := r.opts.Linger - time.Since(passStarted); busy && wait > 0 && !sleep(ctx, wait) {
				return nil
			}
		case <-poll.C:
		}
	}
}

// RunBeside runs the relay while work runs on ctx, and until work has returned (ctx
// done, or work failed): then it stops the relay and publishes what is still pending,
// what work wrote last included, within flushTimeout (rows left then are published by
// another instance or at the next start). It returns work's error. A binary whose only
// work writes the outbox (the scanner, the expiry service) runs that work through it.
func (r *Relay) RunBeside(ctx context.Context, flushTimeout time.Duration, work func(context.Context) error) error {
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	relayDone := make(chan error, 1)
	go func() { relayDone <- r.Run(relayCtx) }()
	defer func() {
		stopRelay()
		if err := <-relayDone; err != nil {
			r.log.Error("outbox relay", "err", err)
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		if err := r.Flush(fctx); err != nil {
			r.log.Warn("outbox: publish at shutdown; another instance or the next start publishes the rest", "err", err)
		}
	}()
	return work(ctx)
}

// Flush publishes everything pending now, batch by batch, and returns the first error.
// Rows another relay holds locked at that moment are left to it. Tests call Flush, and
// a gateway at shutdown (with a fresh, bounded context).
func (r *Relay) Flush(ctx context.Context) error {
	for {
		n, err := r.publishBatch(ctx)
		if err != nil || n < r.opts.BatchSize {
			return err
		}
	}
}

// row is one pending outbox row.
type row struct {
	id        int64
	msgID     string
	subject   string
	payload   []byte
	ephemeral bool
	trace     map[string]string // the writer's W3C trace context; nil: none
}

// publishBatch publishes up to BatchSize pending rows in one transaction, in id order
// (see publish), and records the outcome. It returns how many rows it locked.
func (r *Relay) publishBatch(ctx context.Context) (int, error) {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("outbox: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit

	rows, err := tx.Query(ctx, `SELECT id, msg_id, subject, payload, ephemeral, trace
		FROM outbox
		WHERE published_at IS NULL AND ($2 OR NOT ephemeral)
		ORDER BY id
		LIMIT $1
		FOR UPDATE SKIP LOCKED`, r.opts.BatchSize, r.opts.Open != nil)
	if err != nil {
		return 0, fmt.Errorf("outbox: select pending: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(rw pgx.CollectableRow) (row, error) {
		var x row
		err := rw.Scan(&x.id, &x.msgID, &x.subject, &x.payload, &x.ephemeral, &x.trace)
		return x, err
	})
	if err != nil {
		return 0, fmt.Errorf("outbox: select pending: %w", err)
	}
	if len(batch) == 0 {
		return 0, nil
	}

	published, failed, pubErr := r.publish(ctx, batch)

	// Record even when ctx was cancelled mid-batch: what reached the stream should not
	// be published again if it can still be deleted.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	if len(published) > 0 {
		// A published row leaves the table: one small WAL record each, where marking it
		// published wrote the row again (payload included) with two index entries, and
		// deleted it a day later.
		if _, err := tx.Exec(mctx, `DELETE FROM outbox WHERE id = ANY($1)`, published); err != nil {
			return 0, fmt.Errorf("outbox: delete published: %w", err)
		}
	}
	if failed != nil {
		if _, err := tx.Exec(mctx, `UPDATE outbox SET attempts = attempts + 1, last_error = $2 WHERE id = $1`,
			failed.id, clip.Bytes(pubErr.Error(), lastErrorMax)); err != nil {
			return 0, fmt.Errorf("outbox: record failed publish of %s: %w", failed.msgID, err)
		}
	}
	if err := tx.Commit(mctx); err != nil {
		return 0, fmt.Errorf("outbox: commit: %w", err)
	}
	r.metrics.published(len(published))
	if failed != nil {
		return len(batch), fmt.Errorf("outbox: publish %s on %s: %w", failed.msgID, failed.subject, pubErr)
	}
	return len(batch), nil
}

// publish sends the batch's rows to JetStream in id order without waiting for each
// acknowledgement (one round trip for the batch, not one per row), then waits for them
// all, within publishWait. It returns the ids of the rows the stream acknowledged, and
// the first row that failed, with its error. A row whose payload cannot be opened stops
// the batch before it is sent, so it stays first in line. A row the stream refused does
// not stop the rows behind it, which were sent already: those that went through count as
// published, and the failed row is tried again after them. Each row's publish is a span
// ("outbox publish <subject>"), a child of the trace context its writer stored, and the
// message carries that span's traceparent (and tracestate) as headers.
func (r *Relay) publish(ctx context.Context, batch []row) (published []int64, failed *row, err error) {
	type sent struct {
		row  *row
		ack  jetstream.PubAckFuture
		span trace.Span
	}
	out := make([]sent, 0, len(batch))
	for i := range batch {
		m := &batch[i]
		payload := m.payload
		if m.ephemeral && r.opts.Open != nil {
			if payload, err = r.opts.Open(payload); err != nil {
				// As a failed publish: it stays first in line, tried again with back-off.
				failed, err = m, fmt.Errorf("open sealed payload: %w", err)
				break
			}
		}
		ack, span, perr := r.publishRow(ctx, m, payload)
		if perr != nil {
			endSpan(span, perr)
			failed, err = m, perr
			r.metrics.publishError()
			break
		}
		out = append(out, sent{m, ack, span})
	}
	wait := time.NewTimer(publishWait)
	defer wait.Stop()
	var late error // set once publishWait has passed or ctx is done: no more waiting
	published = make([]int64, 0, len(out))
	for _, s := range out {
		var perr error
		if late == nil {
			select {
			case <-s.ack.Ok():
			case perr = <-s.ack.Err():
			case <-wait.C:
				late = fmt.Errorf("no acknowledgement within %s", publishWait)
			case <-ctx.Done():
				late = ctx.Err()
			}
		}
		if late != nil && perr == nil {
			select {
			case <-s.ack.Ok():
			case perr = <-s.ack.Err():
			default:
				perr = late
			}
		}
		endSpan(s.span, perr)
		if perr == nil {
			published = append(published, s.row.id)
			continue
		}
		r.metrics.publishError()
		// Rows are sent in id order, and one that failed before sending is behind them.
		if failed == nil || failed.id > s.row.id {
			failed, err = s.row, perr
		}
	}
	return published, failed, err
}

// publishRow sends one row (its payload opened) within its publish span, with the
// span's trace context as the message's headers when it has one.
func (r *Relay) publishRow(ctx context.Context, m *row, payload []byte) (jetstream.PubAckFuture, trace.Span, error) {
	if m.trace != nil {
		ctx = tracing.Extract(ctx, propagation.MapCarrier(m.trace))
	}
	ctx, span := tracing.Tracer().Start(ctx, "outbox publish "+m.subject,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingDestinationName(m.subject),
			semconv.MessagingMessageID(m.msgID),
		))
	if !span.SpanContext().IsValid() {
		ack, err := r.js.PublishAsync(m.subject, payload, jetstream.WithMsgID(m.msgID))
		return ack, span, err
	}
	msg := &nats.Msg{Subject: m.subject, Data: payload, Header: nats.Header{}}
	tracing.Inject(ctx, tracing.Headers(msg.Header))
	ack, err := r.js.PublishMsgAsync(msg, jetstream.WithMsgID(m.msgID))
	return ack, span, err
}

// endSpan ends a publish span, recording err.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "publish failed")
	}
	span.End()
}

// cleanup deletes published rows older than Retention, a chunk at a time, and returns
// how many it deleted.
func (r *Relay) cleanup(ctx context.Context) (int64, error) {
	var total int64
	for {
		tag, err := r.pool.Exec(ctx, `DELETE FROM outbox WHERE id IN (
			SELECT id FROM outbox
			WHERE published_at < now() - $1 * interval '1 microsecond'
			LIMIT $2
			FOR UPDATE SKIP LOCKED)`, r.opts.Retention.Microseconds(), cleanupChunk)
		if err != nil {
			return total, fmt.Errorf("outbox: delete published: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < cleanupChunk {
			return total, nil
		}
	}
}

// updatePending refreshes the pending gauges, when metrics are on.
func (r *Relay) updatePending(ctx context.Context) {
	if r.metrics == nil || ctx.Err() != nil {
		return
	}
	var n int64
	var oldest *time.Time
	err := r.pool.QueryRow(ctx, `SELECT count(*), min(created_at) FROM outbox WHERE published_at IS NULL`).Scan(&n, &oldest)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("outbox: count pending", "err", err)
		}
		return
	}
	age := 0.0
	if oldest != nil {
		age = max(time.Since(*oldest).Seconds(), 0)
	}
	r.metrics.setPending(n, age)
}

// sleep waits d, or less when ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// backoff is exponential back-off with full jitter between minBackoff and maxBackoff.
type backoff struct{ cur time.Duration }

func newBackoff() *backoff { return &backoff{} }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = minBackoff
	} else {
		b.cur = min(2*b.cur, maxBackoff)
	}
	// Half fixed, half random: spread retries of several relays apart.
	return b.cur/2 + rand.N(b.cur/2+1)
}

func (b *backoff) reset() { b.cur = 0 }

// metrics are the relay's Prometheus collectors; a nil *metrics records nothing.
type metrics struct {
	publishedTotal prometheus.Counter
	batchesTotal   prometheus.Counter
	errorsTotal    prometheus.Counter
	pending        prometheus.Gauge
	oldestPending  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		publishedTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_outbox_published_total",
			Help: "Outbox messages published to JetStream and deleted from the table.",
		}),
		batchesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_outbox_batches_total",
			Help: "Transactions that published outbox messages (published_total / batches_total: messages a batch).",
		}),
		errorsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_outbox_publish_errors_total",
			Help: "Failed attempts to publish an outbox message.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shipfile_outbox_pending",
			Help: "Outbox messages not yet published.",
		}),
		oldestPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shipfile_outbox_oldest_pending_seconds",
			Help: "Age of the oldest outbox message not yet published (0 when none).",
		}),
	}
	m.publishedTotal = register(reg, m.publishedTotal, log)
	m.batchesTotal = register(reg, m.batchesTotal, log)
	m.errorsTotal = register(reg, m.errorsTotal, log)
	m.pending = register(reg, m.pending, log)
	m.oldestPending = register(reg, m.oldestPending, log)
	return m
}

// register registers c, or returns the collector already registered under its name
// (a second relay in one process shares the first one's metrics).
func register[C prometheus.Collector](reg prometheus.Registerer, c C, log *slog.Logger) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		log.Warn("outbox: register metric", "err", err)
	}
	return c
}

func (m *metrics) published(n int) {
	if m != nil && n > 0 {
		m.publishedTotal.Add(float64(n))
		m.batchesTotal.Inc()
	}
}

func (m *metrics) publishError() {
	if m != nil {
		m.errorsTotal.Inc()
	}
}

func (m *metrics) setPending(n int64, oldestSeconds float64) {
	if m != nil {
		m.pending.Set(float64(n))
		m.oldestPending.Set(oldestSeconds)
	}
}
