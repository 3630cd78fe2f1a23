package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/backoff"
)

// Chain wraps h in mws, the first outermost.
func Chain(h BatchHandler, mws ...Middleware) BatchHandler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// complete makes a batch handler return exactly one decision per message: missing ones
// are Retry.
func complete(h BatchHandler) BatchHandler {
	return func(ctx context.Context, msgs []jetstream.Msg) []Decision {
		out := h(ctx, msgs)
		if len(out) == len(msgs) {
			return out
		}
		full := make([]Decision, len(msgs))
		for i := range full {
			if i < len(out) {
				full[i] = out[i]
			} else {
				full[i] = Decision{Action: Retry, Reason: "the handler returned no decision for this message"}
			}
		}
		return full
	}
}

// KeepAlive tells JetStream every interval that the messages being handled are still
// worked on (InProgress, which restarts their AckWait), until the handler returns. An
// interval <= 0 does nothing.
func KeepAlive(every time.Duration) Middleware {
	return func(next BatchHandler) BatchHandler {
		if every <= 0 {
			return next
		}
		return func(ctx context.Context, msgs []jetstream.Msg) []Decision {
			stop := keepAlive(msgs, every)
			defer stop()
			return next(ctx, msgs)
		}
	}
}

// keepAlive calls InProgress on msgs every interval until the returned stop is called.
// It costs one timer per handled batch and no goroutine until the first interval is
// over (most messages are handled long before): it runs on every message of the hot
// consumers.
func keepAlive(msgs []jetstream.Msg, every time.Duration) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock() // the callback reads t
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		for _, m := range msgs {
			_ = m.InProgress()
		}
		t.Reset(every)
	})
	return func() {
		// Once stop returns, no InProgress is sent any more (the message is settled next).
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

// Backoff turns every Retry decision into a Nak after delay(NumDelivered(msg)); a nil
// delay is backoff.TransientDelay (1s doubling per delivery, at most 1m).
func Backoff(delay func(numDelivered uint64) time.Duration) Middleware {
	if delay == nil {
		delay = backoff.TransientDelay
	}
	return func(next BatchHandler) BatchHandler {
		return func(ctx context.Context, msgs []jetstream.Msg) []Decision {
			out := next(ctx, msgs)
			for i := range out {
				if out[i].Action == Retry {
					out[i].Action = Nak
					out[i].Delay = delay(NumDelivered(msgs[i]))
				}
			}
			return out
		}
	}
}

// Recover turns a panic of the handler into a Retry of every message of the batch
// (logged with its stack), so one bad message does not stop the consumer; a message
// that keeps panicking backs off like any transient failure.
func Recover(log *slog.Logger, name string) Middleware {
	return func(next BatchHandler) BatchHandler {
		return func(ctx context.Context, msgs []jetstream.Msg) (out []Decision) {
			defer func() {
				if p := recover(); p != nil {
					log.Error("consumer handler panicked; its messages will be retried", "consumer", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
					out = make([]Decision, len(msgs))
					for i := range out {
						out[i] = Decision{Action: Retry, Reason: fmt.Sprintf("handler panicked: %v", p)}
					}
				}
			}()
			return next(ctx, msgs)
		}
	}
}

// PoisonFunc records why a poison message was terminated (an audit row, a dead
// letter); the runtime logs it in any case.
type PoisonFunc func(ctx context.Context, msg jetstream.Msg, reason string)

// Poisoned logs every Term decision with its reason and passes it to record (if not
// nil) before the message is terminated.
func Poisoned(log *slog.Logger, name string, record PoisonFunc) Middleware {
	return func(next BatchHandler) BatchHandler {
		return func(ctx context.Context, msgs []jetstream.Msg) []Decision {
			out := next(ctx, msgs)
			for i, d := range out {
				if d.Action != Term {
					continue
				}
				log.Error("poison message terminated", "consumer", name, "subject", msgs[i].Subject(), "reason", d.Reason)
				if record != nil {
					record(ctx, msgs[i], d.Reason)
				}
			}
			return out
		}
	}
}

// Logged logs every Nak or Retry decision that carries a reason (a transient failure
// the handler wants known) at Warn, with the delay it will wait.
func Logged(log *slog.Logger, name string) Middleware {
	return func(next BatchHandler) BatchHandler {
		return func(ctx context.Context, msgs []jetstream.Msg) []Decision {
			out := next(ctx, msgs)
			for i, d := range out {
				if (d.Action == Nak || d.Action == Retry) && d.Reason != "" {
					log.Warn("message will be retried", "consumer", name, "subject", msgs[i].Subject(), "reason", d.Reason, "retry_in", d.Delay.String())
				}
			}
			return out
		}
	}
}

// Metrics are the runtime's Prometheus metrics, shared by the consumers of a process
// (labelled by consumer).
type Metrics struct {
	// Messages counts settled messages by consumer and outcome (ack, nak, term).
	Messages *prometheus.CounterVec
	// Duration observes how long the handler took per batch (a message, for a
	// single-message handler), by consumer.
	Duration *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shipfile_consumer_messages_total",
			Help: "JetStream messages settled, by durable consumer and outcome (ack, nak, term).",
		}, []string{"consumer", "outcome"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shipfile_consumer_handle_seconds",
			Help:    "Time to handle one batch of JetStream messages (one message for most consumers), by durable consumer.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"consumer"}),
	}
	for _, c := range []prometheus.Collector{m.Messages, m.Duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Instrument counts the decisions by outcome and times the handler; nil metrics do
// nothing. The consumer's series are looked up once each (on first use, so a series
// appears once it has a value), not by their labels for every message.
func Instrument(m *Metrics, name string) Middleware {
	return func(next BatchHandler) BatchHandler {
		if m == nil {
			return next
		}
		var (
			once     sync.Once
			duration prometheus.Observer
			outcomes [Retry + 1]atomic.Pointer[prometheus.Counter]
		)
		counter := func(a Action) prometheus.Counter {
			if a < 0 || int(a) >= len(outcomes) {
				return m.Messages.WithLabelValues(name, a.String())
			}
			if c := outcomes[a].Load(); c != nil {
				return *c
			}
			c := m.Messages.WithLabelValues(name, a.String())
			outcomes[a].Store(&c)
			return c
		}
		return func(ctx context.Context, msgs []jetstream.Msg) []Decision {
			start := time.Now()
			out := next(ctx, msgs)
			once.Do(func() { duration = m.Duration.WithLabelValues(name) })
			duration.Observe(time.Since(start).Seconds())
			for _, d := range out {
				counter(d.Action).Inc()
			}
			return out
		}
	}
}
