package app

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// SubscriptionStore reads subscriptions.
type SubscriptionStore interface {
	// Subscriptions returns every subscription.
	Subscriptions(ctx context.Context) ([]Subscription, error)
	// Subscription returns one subscription; ErrNotFound when it does not exist.
	Subscription(ctx context.Context, id int64) (Subscription, error)
	// LastSubscriptionID returns the highest subscription id (0: none).
	LastSubscriptionID(ctx context.Context) (int64, error)
}

// Subscriptions is a dispatcher's cache of every subscription. Changes are pushed to
// it (Changed, from the store's LISTEN connection); while no change can be pushed
// (Stale: the connection is down), every read goes to the store, so a disabled or
// deleted subscription never gets a delivery from an out-of-date cache.
type Subscriptions struct {
	store SubscriptionStore

	mu     sync.RWMutex
	byID   map[int64]Subscription
	lastID int64
	// listening: changes are pushed; fresh: and the cache was reloaded since.
	listening, fresh bool
	// deleted are ids seen removed since the last TakeDeleted.
	deleted []int64

	notify chan struct{}
}

// NewSubscriptions returns an empty, stale cache on store; Reload fills it.
func NewSubscriptions(store SubscriptionStore) *Subscriptions {
	return &Subscriptions{store: store, byID: map[int64]Subscription{}, notify: make(chan struct{}, 1)}
}

// Updates signals (coalesced) that the set of subscriptions or one of them changed.
func (c *Subscriptions) Updates() <-chan struct{} { return c.notify }

func (c *Subscriptions) signal() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// Reload reads every subscription; the cache is fresh from then on if changes are
// pushed (Listening).
func (c *Subscriptions) Reload(ctx context.Context) error {
	subs, err := c.store.Subscriptions(ctx)
	if err != nil {
		return err
	}
	byID := make(map[int64]Subscription, len(subs))
	var last int64
	for _, s := range subs {
		byID[s.ID] = withSigners(s)
		last = max(last, s.ID)
	}
	c.mu.Lock()
	for id := range c.byID {
		if _, ok := byID[id]; !ok {
			c.deleted = append(c.deleted, id)
		}
	}
	c.byID, c.lastID, c.fresh = byID, max(c.lastID, last), c.listening
	c.mu.Unlock()
	c.signal()
	return nil
}

// Listening tells the cache whether changes are pushed to it. While they are not, it
// is stale and every read goes to the store; once they are again, call Reload.
func (c *Subscriptions) Listening(on bool) {
	c.mu.Lock()
	c.listening = on
	if !on {
		c.fresh = false
	}
	c.mu.Unlock()
}

// Changed reloads subscription id after a pushed change (or forgets it, deleted).
// On an error the cache is marked stale until the next Reload.
func (c *Subscriptions) Changed(ctx context.Context, id int64) {
	s, err := c.store.Subscription(ctx, id)
	c.mu.Lock()
	switch {
	case errors.Is(err, ErrNotFound):
		if _, ok := c.byID[id]; ok {
			c.deleted = append(c.deleted, id)
		}
		delete(c.byID, id)
	case err != nil:
		c.fresh = false
	default:
		c.byID[id] = withSigners(s)
		c.lastID = max(c.lastID, id)
	}
	c.mu.Unlock()
	c.signal()
}

// All returns every cached subscription.
func (c *Subscriptions) All() []Subscription {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Subscription, 0, len(c.byID))
	for _, s := range c.byID {
		out = append(out, s)
	}
	return out
}

// TakeDeleted returns the ids of subscriptions seen deleted since the last call.
func (c *Subscriptions) TakeDeleted() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.deleted
	c.deleted = nil
	return out
}

// Get returns subscription id, from the cache while it is fresh; a subscription the
// cache does not know (created a moment ago) is read from the store. ErrNotFound
// when it does not exist.
func (c *Subscriptions) Get(ctx context.Context, id int64) (Subscription, error) {
	c.mu.RLock()
	s, ok := c.byID[id]
	fresh := c.fresh
	c.mu.RUnlock()
	if ok && fresh {
		return s, nil
	}
	s, err := c.store.Subscription(ctx, id)
	if err != nil {
		return Subscription{}, err
	}
	s = withSigners(s)
	if !ok {
		// A new one whose notification is still on its way: announce it (consumers).
		c.mu.Lock()
		c.byID[id] = s
		c.lastID = max(c.lastID, id)
		c.mu.Unlock()
		c.signal()
	}
	return s, nil
}

// Matching returns the subscriptions an event of type typ that occurred at occurredAt
// goes to (Subscription.Selects), from the cache; call CatchUp first (once for a batch
// of events).
func (c *Subscriptions) Matching(typ string, occurredAt time.Time) []Subscription {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []Subscription
	for _, s := range c.byID {
		if s.Selects(typ, occurredAt) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Subscription) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// CatchUp checks, with one cheap query, that no subscription was created since the
// cache last heard of one, and reloads the cache if one was (or while it is stale), so
// an event never misses a subscription whose notification is still on its way.
func (c *Subscriptions) CatchUp(ctx context.Context) error { return c.catchUp(ctx) }

// catchUp reloads the cache when it is stale or misses a subscription created since.
func (c *Subscriptions) catchUp(ctx context.Context) error {
	c.mu.RLock()
	fresh, known := c.fresh, c.lastID
	c.mu.RUnlock()
	if fresh {
		last, err := c.store.LastSubscriptionID(ctx)
		if err != nil {
			return err
		}
		if last <= known {
			return nil
		}
	}
	return c.Reload(ctx)
}
