package app

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
)

func TestSubscriptionSelects(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	later := created.Add(time.Hour)
	cases := []struct {
		name string
		sub  Subscription
		typ  string
		at   time.Time
		want bool
	}{
		{"all events (nil) gets any type", Subscription{Active: true, CreatedAt: created}, events.TypePackageExpired, later, true},
		{"all events gets a type added later", Subscription{Active: true, CreatedAt: created}, "package.archived", later, true},
		{"a selection gets its types", Subscription{Active: true, CreatedAt: created, Events: []string{events.TypePackageCreated}}, events.TypePackageCreated, later, true},
		{"a selection gets no other type", Subscription{Active: true, CreatedAt: created, Events: []string{events.TypePackageCreated}}, events.TypePackageExpired, later, false},
		{"inactive gets nothing", Subscription{CreatedAt: created}, events.TypePackageCreated, later, false},
		{"no event from before it existed", Subscription{Active: true, CreatedAt: created}, events.TypePackageCreated, created.Add(-time.Second), false},
		{"webhook.test is never selected", Subscription{Active: true, CreatedAt: created}, events.TypeWebhookTest, later, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.sub.Selects(c.typ, c.at); got != c.want {
				t.Errorf("Selects(%s) = %v, want %v", c.typ, got, c.want)
			}
		})
	}
}

func TestRateLimiterShare(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		limit     int
		instances int
		n         int
		wantLast  time.Duration // wait of the n-th reservation, all made at once
	}{
		{"no limit never waits", 0, 1, 100, 0},
		{"10/s alone: the 11th waits 1s", 10, 1, 11, time.Second},
		{"10/s shared by two: 5/s each, the 6th waits 1s", 10, 2, 6, time.Second},
		{"1000/s: a burst of 100, then 1ms apart", 1000, 1, 101, time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := NewRateLimiter()
			l.now = func() time.Time { return now }
			l.SetInstances(c.instances)
			s := Subscription{ID: 1, RateLimit: c.limit}
			var last time.Duration
			for range c.n {
				last = l.Reserve(s)
			}
			if d := last - c.wantLast; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("wait of reservation %d = %s, want %s", c.n, last, c.wantLast)
			}
			if other := l.Reserve(Subscription{ID: 2, RateLimit: c.limit}); other != 0 {
				t.Errorf("another subscription waits %s: limits are per subscription", other)
			}
		})
	}
}

// TestBatcherGroupsConcurrentCalls: calls made while a batch runs form the next batch
// (one run for many), each caller gets its own result, and an error reaches them all.
func TestBatcherGroupsConcurrentCalls(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	release := make(chan struct{})
	first := true
	b := newBatcher(1, 100, func(_ context.Context, in []int) ([]int, error) {
		mu.Lock()
		sizes = append(sizes, len(in))
		wait := first
		first = false
		mu.Unlock()
		if wait {
			<-release // hold the first batch while the others queue
		}
		if slices.Contains(in, -1) {
			return nil, errors.New("boom")
		}
		out := make([]int, len(in))
		for i, v := range in {
			out[i] = v * 2
		}
		return out, nil
	})
	defer b.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		if v, err := b.Do(context.Background(), 1); err != nil || v != 2 {
			t.Errorf("first: %d %v", v, err)
		}
	})
	for len(b.in) > 0 || func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == 0 }() {
		time.Sleep(time.Millisecond)
	}
	for i := 2; i <= 20; i++ {
		wg.Go(func() {
			if v, err := b.Do(context.Background(), i); err != nil || v != 2*i {
				t.Errorf("%d: %d %v", i, v, err)
			}
		})
	}
	for len(b.in) < 19 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if !slices.Equal(sizes, []int{1, 19}) {
		t.Errorf("batch sizes %v, want [1 19]", sizes)
	}
	if _, err := b.Do(context.Background(), -1); err == nil {
		t.Error("an error of the batch did not reach its caller")
	}
}
