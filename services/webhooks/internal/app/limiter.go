package app

import "sync"

// hookLimiter caps the attempts in flight per subscription in this instance, so one
// slow receiver cannot take every worker.
type hookLimiter struct {
	max    int
	mu     sync.Mutex
	flight map[int64]int
}

func newHookLimiter(max int) *hookLimiter {
	return &hookLimiter{max: max, flight: make(map[int64]int)}
}

// tryAcquire takes a slot of hookID, or reports false when all are taken.
func (l *hookLimiter) tryAcquire(hookID int64) bool {
	if l.max <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.flight[hookID] >= l.max {
		return false
	}
	l.flight[hookID]++
	return true
}

// release returns a slot taken by tryAcquire.
func (l *hookLimiter) release(hookID int64) {
	if l.max <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.flight[hookID] <= 1 {
		delete(l.flight, hookID)
		return
	}
	l.flight[hookID]--
}
