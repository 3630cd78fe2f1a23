// Package groupcommit runs the items of many concurrent callers together: each Do
// queues its item and waits for its result, and a few runner goroutines take whatever
// items are queued (up to Max) and run them in one call: one round trip, one commit.
// Items that arrive while a round runs form the next one, so rounds grow with the load
// and cost no wait when it is light.
package groupcommit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Options tune a Committer.
type Options struct {
	// Runners is the most rounds in flight at once (default 1).
	Runners int
	// Max is the most items in one round (default 256). Up to Max × Runners items
	// queue; past that, Do waits for room.
	Max int
	// Spill, when positive, makes the runners take turns while rounds are quick: a
	// round waits for the one under way, so rounds grow with the load and never
	// contend with each other (PostgreSQL's WAL flushes, for group commits), unless
	// that one has run for Spill already (a lock, a slow disk): then it runs beside
	// it, up to Runners at once, so a stalled round does not hold up every caller.
	Spill time.Duration
	// Timeout bounds a round, which runs on no caller's context: what it writes is
	// written for all (default 10s).
	Timeout time.Duration
	// Split runs a failed round of several items again one item at a time, so that
	// each gets its own outcome and one item's error (a constraint it breaks) does not
	// fail the others. run must then leave nothing of a failed round behind (one
	// transaction).
	Split bool
	// Exact gives every caller the true outcome of its item: an item whose caller's
	// context ends while it is queued is not run (the caller gets the context's
	// error), and a caller whose item a round has taken waits for that round's outcome
	// whatever its context. Without Exact, a caller returns as soon as its context
	// ends, and its item is run all the same.
	Exact bool
}

// ErrClosed is Do's error when the Committer was closed before the item's round ran.
var ErrClosed = errors.New("group commit closed")

// Committer runs items of type In in rounds of run, each yielding an Out.
type Committer[In, Out any] struct {
	opts Options
	in   chan *item[In, Out]
	run  func(ctx context.Context, items []In) ([]Out, error)
	stop chan struct{}
	wg   sync.WaitGroup
	// turn, when not nil, lets one round run at a time while rounds are quick
	// (Options.Spill).
	turn chan struct{}
	// waiting counts the items queued that no round has taken and no caller abandoned.
	waiting atomic.Int64
}

// Item states, under Exact.
const (
	queued int32 = iota
	taken
	abandoned
)

type item[In, Out any] struct {
	ctx   context.Context
	in    In
	reply chan result[Out] // buffered: a round never waits for its caller
	state atomic.Int32
}

type result[Out any] struct {
	out Out
	err error
}

// New starts the runners of a Committer that calls run with the items of a round; run
// returns one result per item, in order, or an error for them all. Close stops it.
func New[In, Out any](opts Options, run func(ctx context.Context, items []In) ([]Out, error)) *Committer[In, Out] {
	if opts.Runners <= 0 {
		opts.Runners = 1
	}
	if opts.Max <= 0 {
		opts.Max = 256
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	c := &Committer[In, Out]{opts: opts, in: make(chan *item[In, Out], opts.Max*opts.Runners), run: run, stop: make(chan struct{})}
	if opts.Spill > 0 {
		c.turn = make(chan struct{}, 1)
	}
	for range opts.Runners {
		c.wg.Go(c.loop)
	}
	return c
}

// Do queues v and waits for its result, for ctx (see Options.Exact), or for Close.
func (c *Committer[In, Out]) Do(ctx context.Context, v In) (Out, error) {
	var zero Out
	select {
	case <-c.stop:
		return zero, ErrClosed
	default:
	}
	it := &item[In, Out]{ctx: ctx, in: v, reply: make(chan result[Out], 1)}
	c.waiting.Add(1)
	select {
	case c.in <- it:
	case <-ctx.Done():
		c.waiting.Add(-1)
		return zero, ctx.Err()
	case <-c.stop:
		c.waiting.Add(-1)
		return zero, ErrClosed
	}
	select {
	case r := <-it.reply:
		return r.out, r.err
	case <-ctx.Done():
		if !c.opts.Exact {
			return zero, ctx.Err()
		}
		if it.state.CompareAndSwap(queued, abandoned) {
			c.waiting.Add(-1)
			return zero, ctx.Err()
		}
		r := <-it.reply // a round has it: its outcome comes
		return r.out, r.err
	case <-c.stop:
		// Closing: the runners finish the rounds under way (each bounded by Timeout),
		// whose callers get their results; an item no runner took gets none.
		t := time.NewTimer(c.opts.Timeout + time.Second)
		defer t.Stop()
		select {
		case r := <-it.reply:
			return r.out, r.err
		case <-t.C:
			return zero, ErrClosed
		}
	}
}

// Queued is the number of items waiting for a round.
func (c *Committer[In, Out]) Queued() int { return int(c.waiting.Load()) }

// Close stops the runners once the rounds under way are done.
func (c *Committer[In, Out]) Close() {
	close(c.stop)
	c.wg.Wait()
}

func (c *Committer[In, Out]) loop() {
	items := make([]*item[In, Out], 0, c.opts.Max)
	ins := make([]In, 0, c.opts.Max)
	for {
		items, ins = items[:0], ins[:0]
		select {
		case it := <-c.in:
			items = c.take(items, it)
		case <-c.stop:
			return
		}
		took := c.takeTurn()
	more:
		for len(items) < c.opts.Max {
			select {
			case it := <-c.in:
				items = c.take(items, it)
			default:
				break more
			}
		}
		if len(items) == 0 {
			if took {
				<-c.turn
			}
			continue
		}
		for _, it := range items {
			ins = append(ins, it.in)
		}
		outs, err := c.round(ins)
		if took {
			<-c.turn
		}
		if err != nil && c.opts.Split && len(items) > 1 {
			for _, it := range items {
				out, err := c.round([]In{it.in})
				r := result[Out]{err: err}
				if err == nil {
					r.out = out[0]
				}
				it.reply <- r
			}
			continue
		}
		for i, it := range items {
			r := result[Out]{err: err}
			if err == nil {
				r.out = outs[i]
			}
			it.reply <- r
		}
	}
}

// take adds it to the round in items, unless (under Exact) its caller has gone: an
// item whose caller abandoned it gets no reply, one whose caller's context has ended
// gets its error.
func (c *Committer[In, Out]) take(items []*item[In, Out], it *item[In, Out]) []*item[In, Out] {
	if !c.opts.Exact {
		c.waiting.Add(-1)
		return append(items, it)
	}
	if !it.state.CompareAndSwap(queued, taken) {
		return items
	}
	c.waiting.Add(-1)
	if err := it.ctx.Err(); err != nil {
		it.reply <- result[Out]{err: err}
		return items
	}
	return append(items, it)
}

// round runs one round on a context of its own: it runs to its end whoever waits.
func (c *Committer[In, Out]) round(ins []In) ([]Out, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	return c.run(ctx, ins)
}

// takeTurn waits for the round under way (up to Spill) and reports whether this
// runner holds the turn; false when the runners take no turns or the wait ran out.
func (c *Committer[In, Out]) takeTurn() bool {
	if c.turn == nil {
		return false
	}
	select {
	case c.turn <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(c.opts.Spill)
	defer t.Stop()
	select {
	case c.turn <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}
