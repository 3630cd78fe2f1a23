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
	b := &batcher[In, Out]{in: make(chan batchItem[In, Out], max*runners), max: max, run: run, stop: make(chan struct{})}
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
		for i, it := range items {
			r := batchResult[Out]{err: err}
			if err == nil {
				r.out = outs[i]
			}
			it.reply <- r
		}
	}
}
