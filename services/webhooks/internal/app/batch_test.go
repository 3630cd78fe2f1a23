package app

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSpillBatcherTakesTurns: while batches are quick, one runs at a time (four
// runners, many callers); a batch that stalls past the spill no longer holds up the
// others: the next batch runs beside it and its callers get their results while the
// stalled one still runs.
func TestSpillBatcherTakesTurns(t *testing.T) {
	var running, most atomic.Int32
	stall := make(chan struct{})
	// The spill is far longer than a quick batch (1 ms) can take even under -race on a
	// loaded machine (50 ms flaked in CI: a slow quick batch let the next start beside it).
	const spill = time.Second
	b := newSpillBatcher(4, 10, spill, func(_ context.Context, in []int) ([]int, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if in[0] < 0 {
			<-stall // a commit held up by a lock
		} else {
			time.Sleep(time.Millisecond)
		}
		return in, nil
	})
	defer b.Close()

	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if v, err := b.Do(context.Background(), i); err != nil || v != i {
				t.Errorf("Do(%d) = %d, %v", i, v, err)
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Fatalf("%d quick batches ran at once, want them one at a time", m)
	}

	stalled := make(chan error, 1)
	go func() { _, err := b.Do(context.Background(), -1); stalled <- err }()
	for deadline := time.Now().Add(5 * time.Second); running.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stalled batch never started")
		}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if v, err := b.Do(ctx, 7); err != nil || v != 7 {
		t.Fatalf("a call behind a stalled batch: %d, %v; want its result once the spill ran out", v, err)
	}
	if waited := time.Since(start); waited < spill {
		t.Fatalf("the call's batch started after %s, before the spill of %s: it did not wait its turn", waited, spill)
	}
	select {
	case err := <-stalled:
		t.Fatalf("the stalled batch ended (%v) before the call behind it", err)
	default:
	}
	close(stall)
	if err := <-stalled; err != nil {
		t.Fatal(err)
	}
}
