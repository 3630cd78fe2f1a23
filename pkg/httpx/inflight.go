package httpx

import (
	"errors"
	"sync"
)

// InFlight bounds requests in flight: at most Total at once over all keys, and at most
// PerKey at once for any one key (a token, a link, a session). It is held in memory
// by each instance; a request holds its slots from Acquire until the release it
// returns is called.
type InFlight struct {
	total, perKey int

	mu   sync.Mutex
	n    int
	keys map[string]int
}

// Errors of Acquire.
var (
	// ErrBusy: the instance as a whole has Total requests in flight (answer 503).
	ErrBusy = errors.New("too many requests in flight on this server")
	// ErrKeyBusy: one of the keys has PerKey requests in flight (answer 429).
	ErrKeyBusy = errors.New("too many requests in flight for this client")
)

// NewInFlight returns a limit of total requests at once and perKey per key; a limit
// < 1 is no limit.
func NewInFlight(total, perKey int) *InFlight {
	return &InFlight{total: total, perKey: perKey, keys: map[string]int{}}
}

// Acquire takes a slot overall and one for each non-empty key, or none of them: it
// fails at once with ErrKeyBusy when a key is full, else with ErrBusy when the
// instance is. Call release exactly once when the request ends.
func (l *InFlight) Acquire(keys ...string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perKey > 0 {
		for _, k := range keys {
			if k != "" && l.keys[k] >= l.perKey {
				return nil, ErrKeyBusy
			}
		}
	}
	if l.total > 0 && l.n >= l.total {
		return nil, ErrBusy
	}
	l.n++
	for _, k := range keys {
		if k != "" {
			l.keys[k]++
		}
	}
	var once sync.Once
	return func() { once.Do(func() { l.release(keys) }) }, nil
}

func (l *InFlight) release(keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	for _, k := range keys {
		if k == "" {
			continue
		}
		if l.keys[k]--; l.keys[k] <= 0 {
			delete(l.keys, k)
		}
	}
}

// InUse is the number of requests in flight.
func (l *InFlight) InUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}
