package app

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// RateLimiter holds each subscription's rate_limit across dispatcher instances: every
// live instance (Instances, kept by a heartbeat) takes an equal share, so together
// they never send more than the limit (at most briefly, while an instance that just
// joined is not yet counted by the others). An instance that gets fewer of a
// subscription's jobs than its share leaves some of the limit unused: the limit is a
// ceiling, not a promise. Within an instance, deliveries are spaced by GCRA with a
// burst of a tenth of a second's share.
type RateLimiter struct {
	instances atomic.Int64
	now       func() time.Time

	mu  sync.Mutex
	tat map[int64]time.Time // theoretical arrival time of the next delivery, by subscription
}

// NewRateLimiter returns a limiter for one instance, alone until SetInstances.
func NewRateLimiter() *RateLimiter {
	l := &RateLimiter{now: time.Now, tat: map[int64]time.Time{}}
	l.instances.Store(1)
	return l
}

// SetInstances sets how many dispatcher instances share each limit (at least 1).
func (l *RateLimiter) SetInstances(n int) { l.instances.Store(int64(max(n, 1))) }

// Instances returns how many instances share each limit.
func (l *RateLimiter) Instances() int { return int(l.instances.Load()) }

// Reserve takes a slot of s's rate and returns how long to wait before sending; 0
// when s has no limit.
func (l *RateLimiter) Reserve(s Subscription) time.Duration {
	if s.RateLimit <= 0 {
		return 0
	}
	share := float64(s.RateLimit) / float64(l.instances.Load())
	interval := time.Duration(float64(time.Second) / share)
	burst := max(1, int(share/10))
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	tat := l.tat[s.ID]
	if tat.Before(now) {
		tat = now
	}
	wait := tat.Sub(now) - time.Duration(burst-1)*interval
	l.tat[s.ID] = tat.Add(interval)
	return max(wait, 0)
}

// Forget drops the state of a subscription that is gone.
func (l *RateLimiter) Forget(id int64) {
	l.mu.Lock()
	delete(l.tat, id)
	l.mu.Unlock()
}

// Wait waits for a slot of s's rate, or for ctx.
func (l *RateLimiter) Wait(ctx context.Context, s Subscription) error {
	d := l.Reserve(s)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
