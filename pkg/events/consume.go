package events

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fetchRetryDelay is how long Consume waits after a failed fetch.
const fetchRetryDelay = time.Second

// Consume fetches up to batch messages at a time from cons, each fetch waiting at
// most wait, and passes each message to handle, until ctx is done. A message fetched
// once ctx is done is not handled but returned at once (Nak), for another instance.
// A fetch that fails for another reason than an empty queue is logged and retried
// after a second. A worker that fetches one message at a time (batch 1) lets no
// message wait in its buffer while its AckWait runs.
func Consume(ctx context.Context, cons jetstream.Consumer, batch int, wait time.Duration, log *slog.Logger, handle func(jetstream.Msg)) {
	for ctx.Err() == nil {
		b, err := cons.Fetch(batch, jetstream.FetchMaxWait(wait))
		if err == nil {
			for msg := range b.Messages() {
				if ctx.Err() != nil {
					// Stopping: hand it to another instance at once.
					_ = msg.Nak()
					continue
				}
				handle(msg)
			}
			err = b.Error()
		}
		if err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
			log.Warn("fetch", "consumer", consumerName(cons), "err", err)
			sleep(ctx, fetchRetryDelay)
		}
	}
}

// KeepAlive tells JetStream every interval that msg is still being worked on
// (InProgress, which restarts its AckWait), until the returned stop is called. An
// interval <= 0 does nothing.
func KeepAlive(msg jetstream.Msg, every time.Duration) (stop func()) {
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// NumDelivered is how many times JetStream has delivered msg, this time included (1
// when its metadata cannot be read).
func NumDelivered(msg jetstream.Msg) uint64 {
	if md, err := msg.Metadata(); err == nil {
		return md.NumDelivered
	}
	return 1
}

// consumerName is the consumer's name as the server last told it ("" if it never did).
func consumerName(cons jetstream.Consumer) string {
	if info := cons.CachedInfo(); info != nil {
		return info.Name
	}
	return ""
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

// Action is what becomes of a consumed message once handled.
type Action int

// Actions on a consumed message.
const (
	Ack  Action = iota // done: handled, finally failed, or nothing to do
	Nak                // again after Decision.Delay
	Term               // never again: the message is malformed (poison)
)

// Decision is the outcome of handling one message.
type Decision struct {
	Action Action
	Delay  time.Duration // of a Nak
	Reason string        // of a Term, for the log
}

// Settle acknowledges, naks (with the decision's delay, if any) or terminates msg as d
// says.
func Settle(msg jetstream.Msg, d Decision) error {
	switch d.Action {
	case Nak:
		if d.Delay > 0 {
			return msg.NakWithDelay(d.Delay)
		}
		return msg.Nak()
	case Term:
		return msg.Term()
	default:
		return msg.Ack()
	}
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
