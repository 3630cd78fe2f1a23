package app

import (
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
