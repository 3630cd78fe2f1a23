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

// fakeSubs is a SubscriptionStore in memory that counts its reads.
type fakeSubs struct {
	mu    sync.Mutex
	byID  map[int64]Subscription
	reads int
}

func (f *fakeSubs) Subscriptions(context.Context) ([]Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	var out []Subscription
	for _, s := range f.byID {
		out = append(out, s)
	}
	return out, nil
}

func (f *fakeSubs) Subscription(_ context.Context, id int64) (Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	s, ok := f.byID[id]
	if !ok {
		return Subscription{}, ErrNotFound
	}
	return s, nil
}

func (f *fakeSubs) LastSubscriptionID(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var last int64
	for id := range f.byID {
		last = max(last, id)
	}
	return last, nil
}

func (f *fakeSubs) set(s Subscription) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byID[s.ID] = s
}

func (f *fakeSubs) del(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byID, id)
}

func (f *fakeSubs) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func TestSubscriptionsCache(t *testing.T) {
	ctx := context.Background()
	created := time.Now().Add(-time.Hour)
	sub := func(id int64, active bool) Subscription {
		return Subscription{ID: id, Active: active, CreatedAt: created, MaxInFlight: 16}
	}
	newCache := func() (*fakeSubs, *Subscriptions) {
		store := &fakeSubs{byID: map[int64]Subscription{1: sub(1, true)}}
		c := NewSubscriptions(store)
		c.Listening(true)
		if err := c.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		return store, c
	}

	t.Run("fresh: reads come from memory", func(t *testing.T) {
		store, c := newCache()
		before := store.readCount()
		for range 10 {
			if s, err := c.Get(ctx, 1); err != nil || !s.Active {
				t.Fatalf("%+v %v", s, err)
			}
		}
		if n := store.readCount() - before; n != 0 {
			t.Errorf("%d store reads for cached subscriptions", n)
		}
	})

	t.Run("stale: every read goes to the store", func(t *testing.T) {
		store, c := newCache()
		c.Listening(false) // the LISTEN connection dropped
		store.set(sub(1, false))
		if s, err := c.Get(ctx, 1); err != nil || s.Active {
			t.Fatalf("a stale cache answered %+v %v, want the store's disabled subscription", s, err)
		}
		store.del(1)
		if _, err := c.Get(ctx, 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted while stale: %v", err)
		}
		// A reload while not listening does not make it fresh.
		store.set(sub(1, true))
		if err := c.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		before := store.readCount()
		_, _ = c.Get(ctx, 1)
		if store.readCount() == before {
			t.Error("a reload without a listener made the cache fresh")
		}
	})

	t.Run("pushed changes: disabled, deleted", func(t *testing.T) {
		store, c := newCache()
		store.set(sub(1, false))
		c.Changed(ctx, 1)
		if s, _ := c.Get(ctx, 1); s.Active {
			t.Error("still active after the pushed change")
		}
		store.del(1)
		c.Changed(ctx, 1)
		if _, err := c.Get(ctx, 1); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted: %v", err)
		}
		if got := c.TakeDeleted(); !slices.Equal(got, []int64{1}) {
			t.Errorf("TakeDeleted = %v", got)
		}
		if got := c.TakeDeleted(); got != nil {
			t.Errorf("TakeDeleted again = %v", got)
		}
	})

	t.Run("a subscription created before its notification still gets the event", func(t *testing.T) {
		store, c := newCache()
		store.set(sub(2, true)) // committed; the NOTIFY has not arrived
		if err := c.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, s := range c.Matching(events.TypePackageCreated, time.Now()) {
			ids = append(ids, s.ID)
		}
		if !slices.Equal(ids, []int64{1, 2}) {
			t.Errorf("matching %v, want [1 2]", ids)
		}
	})

	t.Run("updates are signalled", func(t *testing.T) {
		store, c := newCache()
		for len(c.Updates()) > 0 {
			<-c.Updates()
		}
		store.set(sub(1, true))
		c.Changed(ctx, 1)
		select {
		case <-c.Updates():
		default:
			t.Error("no update signalled")
		}
	})
}
