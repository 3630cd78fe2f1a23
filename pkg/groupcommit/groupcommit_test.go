package groupcommit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// double is a round that doubles its items, and fails when one of them is negative.
func double(_ context.Context, in []int) ([]int, error) {
	if slices.ContainsFunc(in, func(v int) bool { return v < 0 }) {
		return nil, errors.New("boom")
	}
	out := make([]int, len(in))
	for i, v := range in {
		out[i] = v * 2
	}
	return out, nil
}

// held returns a round that records its sizes and holds the first round until release
// is closed, and started, closed once the first round runs.
func held(run func(context.Context, []int) ([]int, error)) (r func(context.Context, []int) ([]int, error), sizes func() []int, started, release chan struct{}) {
	var mu sync.Mutex
	var got []int
	started, release = make(chan struct{}), make(chan struct{})
	first := true
	r = func(ctx context.Context, in []int) ([]int, error) {
		mu.Lock()
		got = append(got, len(in))
		wait := first
		first = false
		mu.Unlock()
		if wait {
			close(started)
			<-release // hold the first round while the others queue
		}
		return run(ctx, in)
	}
	sizes = func() []int { mu.Lock(); defer mu.Unlock(); return slices.Clone(got) }
	return r, sizes, started, release
}

// TestGroupsConcurrentCalls: calls made while a round runs form the next round (one
// run for many), each caller gets its own result, and an error reaches them all.
func TestGroupsConcurrentCalls(t *testing.T) {
	run, sizes, started, release := held(double)
	c := New(Options{Runners: 1, Max: 100}, run)
	defer c.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		if v, err := c.Do(context.Background(), 1); err != nil || v != 2 {
			t.Errorf("first: %d %v", v, err)
		}
	})
	<-started
	for i := 2; i <= 20; i++ {
		wg.Go(func() {
			if v, err := c.Do(context.Background(), i); err != nil || v != 2*i {
				t.Errorf("%d: %d %v", i, v, err)
			}
		})
	}
	for len(c.in) < 19 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if got := sizes(); !slices.Equal(got, []int{1, 19}) {
		t.Errorf("round sizes %v, want [1 19]", got)
	}
	if _, err := c.Do(context.Background(), -1); err == nil {
		t.Error("an error of the round did not reach its caller")
	}
}

// TestMaxCapsARound: no round carries more than Max items; the rest go in the next.
func TestMaxCapsARound(t *testing.T) {
	run, sizes, started, release := held(double)
	c := New(Options{Runners: 1, Max: 4}, run)
	defer c.Close()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.Do(context.Background(), 1) })
	<-started
	for i := range 6 {
		wg.Go(func() { _, _ = c.Do(context.Background(), i) })
	}
	for len(c.in) < 4 { // the channel holds Max × Runners
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	close(release)
	wg.Wait()
	for _, n := range sizes() {
		if n > 4 {
			t.Fatalf("round sizes %v: one is over Max", sizes())
		}
	}
}

// TestSplitGivesEachItemItsOutcome: with Split, a round that fails is run again one
// item at a time: the item that breaks it fails alone.
func TestSplitGivesEachItemItsOutcome(t *testing.T) {
	run, sizes, started, release := held(double)
	c := New(Options{Runners: 1, Max: 100, Split: true}, run)
	defer c.Close()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.Do(context.Background(), 1) })
	<-started
	for _, v := range []int{2, -1, 3} {
		wg.Go(func() {
			got, err := c.Do(context.Background(), v)
			switch {
			case v < 0 && err == nil:
				t.Errorf("%d: no error", v)
			case v >= 0 && (err != nil || got != 2*v):
				t.Errorf("%d: %d %v, want %d", v, got, err, 2*v)
			}
		})
	}
	for len(c.in) < 3 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if got := sizes(); !slices.Equal(got, []int{1, 3, 1, 1, 1}) {
		t.Errorf("round sizes %v, want [1 3 1 1 1]: the failed round, then each item alone", got)
	}
}

// TestExactLeavesOutAbandonedItems: under Exact, an item whose caller went away while
// it queued is not run, and its caller gets its context's error; without Exact, the
// caller returns at once and the item runs all the same.
func TestExactLeavesOutAbandonedItems(t *testing.T) {
	for _, exact := range []bool{true, false} {
		var ran atomic.Int32
		run, _, started, release := held(func(ctx context.Context, in []int) ([]int, error) {
			for _, v := range in {
				if v == 7 {
					ran.Add(1)
				}
			}
			return double(ctx, in)
		})
		c := New(Options{Runners: 1, Max: 100, Exact: exact}, run)
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = c.Do(context.Background(), 1) })
		<-started
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := c.Do(ctx, 7); done <- err }()
		for len(c.in) < 1 {
			time.Sleep(time.Millisecond)
		}
		if c.Queued() != 1 {
			t.Errorf("exact %v: %d queued, want 1", exact, c.Queued())
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("exact %v: a caller gone while queued got %v", exact, err)
		}
		if want := map[bool]int{true: 0, false: 1}[exact]; c.Queued() != want {
			t.Errorf("exact %v: %d queued once its caller went away, want %d", exact, c.Queued(), want)
		}
		close(release)
		wg.Wait()
		for deadline := time.Now().Add(5 * time.Second); !exact && ran.Load() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		c.Close()
		if want := map[bool]int32{true: 0, false: 1}[exact]; ran.Load() != want {
			t.Errorf("exact %v: the abandoned item ran %d times, want %d", exact, ran.Load(), want)
		}
	}
}

// TestExactWaitsForATakenRound: under Exact, a caller whose item a round has taken
// gets that round's outcome even when its context ends meanwhile.
func TestExactWaitsForATakenRound(t *testing.T) {
	run, _, started, release := held(double)
	c := New(Options{Runners: 1, Max: 100, Exact: true}, run)
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := c.Do(ctx, 1); done <- err }()
	<-started
	cancel()
	select {
	case err := <-done:
		t.Fatalf("returned %v while its round ran", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the round's outcome: %v, want nil", err)
	}
}

// TestSpillTakesTurns: while rounds are quick, one runs at a time (four runners, many
// callers); a round that stalls past the spill no longer holds up the others: the next
// round runs beside it and its callers get their results while the stalled one still
// runs.
func TestSpillTakesTurns(t *testing.T) {
	var running, most atomic.Int32
	stall := make(chan struct{})
	// The spill is far longer than a quick round (1 ms) can take even under -race on a
	// loaded machine (50 ms flaked in CI: a slow quick round let the next start beside it).
	const spill = time.Second
	c := New(Options{Runners: 4, Max: 10, Spill: spill}, func(_ context.Context, in []int) ([]int, error) {
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
	defer c.Close()

	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if v, err := c.Do(context.Background(), i); err != nil || v != i {
				t.Errorf("Do(%d) = %d, %v", i, v, err)
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Fatalf("%d quick rounds ran at once, want them one at a time", m)
	}

	stalled := make(chan error, 1)
	go func() { _, err := c.Do(context.Background(), -1); stalled <- err }()
	for deadline := time.Now().Add(5 * time.Second); running.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stalled round never started")
		}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if v, err := c.Do(ctx, 7); err != nil || v != 7 {
		t.Fatalf("a call behind a stalled round: %d, %v; want its result once the spill ran out", v, err)
	}
	if waited := time.Since(start); waited < spill {
		t.Fatalf("the call's round started after %s, before the spill of %s: it did not wait its turn", waited, spill)
	}
	select {
	case err := <-stalled:
		t.Fatalf("the stalled round ended (%v) before the call behind it", err)
	default:
	}
	close(stall)
	if err := <-stalled; err != nil {
		t.Fatal(err)
	}
}

// TestCloseEndsWaitingCalls: after Close, Do answers ErrClosed.
func TestCloseEndsWaitingCalls(t *testing.T) {
	c := New(Options{}, double)
	c.Close()
	if _, err := c.Do(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close: %v, want ErrClosed", err)
	}
}
