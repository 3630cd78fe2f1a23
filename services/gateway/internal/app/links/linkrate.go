package links

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// RateStore keeps request rates shared by every gateway instance.
type RateStore interface {
	// TakeRate takes one request from the GCRA bucket of key: interval is the time
	// one request earns back, tolerance how far ahead of now the bucket may run. An
	// empty bucket answers false and how long until a request fits.
	TakeRate(ctx context.Context, key string, interval, tolerance time.Duration) (bool, time.Duration, error)
	// SweepRates forgets buckets that have been full for longer than idle.
	SweepRates(ctx context.Context, idle time.Duration) error
}

// LinkRate limits the requests of one client IP address to the link routes (the
// recipient's page and API): rate a second with a burst of burst, counted in
// PostgreSQL so that every gateway instance shares one count.
type LinkRate struct {
	store     RateStore
	interval  time.Duration
	tolerance time.Duration
	lastSweep atomic.Int64
	// prefix sets the buckets of this limit apart from the other limits' in the one
	// table ("" for the link routes, "login:" for sign-ins).
	prefix string
	// detail is the answer over the limit.
	detail string
}

// sweepEvery is how often an instance forgets the buckets of clients gone quiet.
const sweepEvery = time.Minute

// NewLinkRate returns the limit; rate <= 0 returns nil, which allows everything.
func NewLinkRate(store RateStore, rate float64, burst int) *LinkRate {
	if rate <= 0 {
		return nil
	}
	if burst < 1 {
		burst = 1
	}
	interval := time.Duration(float64(time.Second) / rate)
	return &LinkRate{store: store, interval: interval, tolerance: interval * time.Duration(burst),
		detail: "too many requests to links from this address; retry later"}
}

// NewLoginRate returns the request rate of sign-ins (POST /login) per client IP
// address (an IPv6 client by its /64): rate a second with a burst of burst, counted
// in PostgreSQL across gateway instances like the link routes' rate, in buckets of
// their own. rate <= 0 returns nil, which allows everything.
func NewLoginRate(store RateStore, rate float64, burst int) *LinkRate {
	l := NewLinkRate(store, rate, burst)
	if l != nil {
		l.prefix, l.detail = "login:", "too many sign-in attempts from this address; retry later"
	}
	return l
}

// Take counts one request of the client at ip. Over the limit it returns a
// KindTooMany error whose RetryAfter says when the next request fits.
func (l *LinkRate) Take(ctx context.Context, ip string) error {
	if l == nil {
		return nil
	}
	now := time.Now()
	if last := l.lastSweep.Load(); now.UnixNano()-last > int64(sweepEvery) && l.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		_ = l.store.SweepRates(context.WithoutCancel(ctx), sweepEvery)
	}
	ok, wait, err := l.store.TakeRate(ctx, l.prefix+app.RateKey(ip), l.interval, l.tolerance)
	if err != nil {
		return err
	}
	if !ok {
		return app.TooMany(wait, "%s", l.detail)
	}
	return nil
}
