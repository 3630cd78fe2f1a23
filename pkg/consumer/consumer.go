// Package consumer is the one runtime every JetStream consumer of shipfile goes
// through. A handler says what becomes of each message (a Decision: Ack, Nak after a
// delay, Retry after the back-off of its delivery count, or Term with the reason);
// keeping a message alive while it is worked on, back-off, poison messages, panics,
// logging and metrics are middleware around it (the shape of watermill's handler
// middleware and outpost's consumer worker). The runtime fetches messages (Pull) or is
// handed them (Process), runs the chain and settles each message exactly once.
//
// A handler may take a batch (BatchHandler) and return one decision per message, so a
// consumer that group-commits what a batch caused acknowledges each message only after
// that commit.
package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/msgerr"
)

// Action is what becomes of a consumed message once handled.
type Action int

// Actions on a consumed message.
const (
	Ack  Action = iota // done: handled, finally failed, or nothing to do
	Nak                // again after Decision.Delay (at once when 0)
	Term               // never again: the message is malformed (poison); Reason says why
	// Retry is a transient failure of the handler's own dependencies (database, NATS):
	// the Backoff middleware turns it into a Nak after the back-off of the message's
	// delivery count.
	Retry
)

// String names the action as the metrics' outcome label does.
func (a Action) String() string {
	switch a {
	case Ack:
		return "ack"
	case Nak:
		return "nak"
	case Term:
		return "term"
	case Retry:
		return "retry"
	default:
		return fmt.Sprintf("action(%d)", int(a))
	}
}

// Decision is the outcome of handling one message.
type Decision struct {
	Action Action
	Delay  time.Duration // of a Nak
	// Reason says why: recorded with a Term (poison), logged with a Nak or Retry that
	// has one.
	Reason string
}

// Acked is the decision to acknowledge a message.
func Acked() Decision { return Decision{Action: Ack} }

// NakAfter is the decision to hand a message back, to be delivered again after delay.
func NakAfter(delay time.Duration) Decision { return Decision{Action: Nak, Delay: delay} }

// Poison is the decision to terminate a malformed message, recording why.
func Poison(reason string) Decision { return Decision{Action: Term, Reason: reason} }

// Failed is the decision to try a message again after the back-off of its delivery
// count, because handling it hit a transient error (logged as the reason).
func Failed(err error) Decision { return Decision{Action: Retry, Reason: err.Error()} }

// Handler handles one message. ctx is the work context: it outlives the stop of the
// fetching for the shutdown grace period.
type Handler func(ctx context.Context, msg jetstream.Msg) Decision

// BatchHandler handles a batch of messages and returns one decision per message, in
// order. A batch handler that returns fewer decisions than messages leaves the rest to
// be tried again (Retry).
type BatchHandler func(ctx context.Context, msgs []jetstream.Msg) []Decision

// Middleware wraps a batch handler with what every consumer does around it.
type Middleware func(BatchHandler) BatchHandler

// Single turns a handler of one message into a batch handler that handles the
// messages of a batch one after another.
func Single(h Handler) BatchHandler {
	return func(ctx context.Context, msgs []jetstream.Msg) []Decision {
		out := make([]Decision, len(msgs))
		for i, m := range msgs {
			out[i] = h(ctx, m)
		}
		return out
	}
}

// Settle acknowledges, naks (with the decision's delay, if any) or terminates msg as d
// says. A Retry that no Backoff middleware resolved is handed back at once.
func Settle(msg jetstream.Msg, d Decision) error {
	switch d.Action {
	case Nak, Retry:
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

// NumDelivered is how many times JetStream has delivered msg, this time included (1
// when its metadata cannot be read).
func NumDelivered(msg jetstream.Msg) uint64 {
	if md, err := msg.Metadata(); err == nil {
		return md.NumDelivered
	}
	return 1
}

// Decide turns what a handler's domain code returned into a decision: nil is Ack, a
// msgerr.Poison is Term with the error as the reason, a msgerr.RetryAfter is a Nak
// after its delay (with its cause as the reason, when it has one), and any other error
// is a Retry after the back-off of the delivery count (Failed).
func Decide(err error) Decision {
	if err == nil {
		return Acked()
	}
	if msgerr.IsPoison(err) {
		return Poison(err.Error())
	}
	if delay, cause, ok := msgerr.Delay(err); ok {
		d := NakAfter(delay)
		if cause != nil {
			d.Reason = err.Error()
		}
		return d
	}
	return Failed(err)
}

// Errors turns a handler that returns an error (nil, msgerr.RetryAfter, msgerr.Poison
// or another) into a Handler, through Decide.
func Errors(h func(ctx context.Context, msg jetstream.Msg) error) Handler {
	return func(ctx context.Context, msg jetstream.Msg) Decision { return Decide(h(ctx, msg)) }
}
