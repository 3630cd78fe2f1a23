package app

import (
	"context"
	"errors"
	"sync"
	"time"
)

// batcher runs many callers' requests together: each Do waits for the result of its
// item, and a few runner goroutines take whatever items are queued (up to max) and
// run them in one call: a group commit. Items that arrive while a batch runs form the
// next one, so batches grow with the load and cost no wait when it is light.
type batcher[In, Out any] struct {
	in   chan batchItem[In, Out]
	max  int
	run  func(ctx context.Context, items []In) ([]Out, error)
	stop chan struct{}
	wg   sync.WaitGroup

	// turn, when not nil, lets one batch run at a time while batches are quick: a
	// runner with items waits for the batch under way for up to spill, then runs
	// alongside it (see newSpillBatcher).
	turn  chan struct{}
	spill time.Duration
}

type batchItem[In, Out any] struct {
	in    In
	reply chan batchResult[Out]
}

type batchResult[Out any] struct {
	out Out
	err error
}

// newBatcher starts runners goroutines that call run with at most max items; run
// returns one result per item, in order, or an error for them all. Close stops them.
func newBatcher[In, Out any](runners, max int, run func(ctx context.Context, items []In) ([]Out, error)) *batcher[In, Out] {
	return newSpillBatcher(runners, max, 0, run)
}

// newSpillBatcher is newBatcher whose runners take turns: a batch waits for the one
// under way, so the batches grow with the load and never contend with each other
// (PostgreSQL's WAL flushes, for group commits), unless that one has run for spill
// already (a lock, a slow disk): then it runs alongside, up to runners at once, so a
// stalled batch does not hold up every caller. With spill 0 the runners do not take
// turns.
func newSpillBatcher[In, Out any](runners, max int, spill time.Duration, run func(ctx context.Context, items []In) ([]Out, error)) *batcher[In, Out] {
	b := &batcher[In, Out]{in: make(chan batchItem[In, Out], max*runners), max: max, run: run, stop: make(chan struct{}), spill: spill}
	if spill > 0 {
		b.turn = make(chan struct{}, 1)
	}
	for range runners {
		b.wg.Go(b.loop)
	}
	return b
}

// errBatcherClosed: the batcher was closed before the item's batch ran.
var errBatcherClosed = errors.New("batcher closed")

// Do queues item and waits for its result, for ctx, or for Close.
func (b *batcher[In, Out]) Do(ctx context.Context, item In) (Out, error) {
	reply := make(chan batchResult[Out], 1)
	var zero Out
	select {
	case b.in <- batchItem[In, Out]{in: item, reply: reply}:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-b.stop:
		return zero, errBatcherClosed
	}
	select {
	case r := <-reply:
		return r.out, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-b.stop:
		// Closing: the runners finish the batches under way (each bounded by
		// recordTimeout), whose callers get their results; an item no runner took
		// gets none.
		t := time.NewTimer(recordTimeout + time.Second)
		defer t.Stop()
		select {
		case r := <-reply:
			return r.out, r.err
		case <-t.C:
			return zero, errBatcherClosed
		}
	}
}

// Close stops the runners once the batches under way are done.
func (b *batcher[In, Out]) Close() {
	close(b.stop)
	b.wg.Wait()
}

func (b *batcher[In, Out]) loop() {
	items := make([]batchItem[In, Out], 0, b.max)
	ins := make([]In, 0, b.max)
	for {
		items, ins = items[:0], ins[:0]
		select {
		case it := <-b.in:
			items = append(items, it)
		case <-b.stop:
			return
		}
		took := b.takeTurn()
	more:
		for len(items) < b.max {
			select {
			case it := <-b.in:
				items = append(items, it)
			default:
				break more
			}
		}
		for _, it := range items {
			ins = append(ins, it.in)
		}
		// The batch runs to its end whoever waits: what it writes is written for all.
		ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
		outs, err := b.run(ctx, ins)
		cancel()
		if took {
			<-b.turn
		}
		for i, it := range items {
			r := batchResult[Out]{err: err}
			if err == nil {
				r.out = outs[i]
			}
			it.reply <- r
		}
	}
}

// takeTurn waits for the batch under way (up to spill) and reports whether this
// runner holds the turn; false when the batcher takes no turns or the wait ran out.
func (b *batcher[In, Out]) takeTurn() bool {
	if b.turn == nil {
		return false
	}
	select {
	case b.turn <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(b.spill)
	defer t.Stop()
	select {
	case b.turn <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}
