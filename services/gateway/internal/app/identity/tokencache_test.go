package identity

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

func TestTokenCache(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	key := sha256.Sum256([]byte("sf_token"))
	owner := app.TokenOwner{TokenID: 7, User: app.User{ID: 3}}
	const ttl, window = 10 * time.Second, 750 * time.Millisecond

	// warm returns a cache whose feed is live at t0 and that holds owner.
	warm := func(t *testing.T) *TokenCache {
		t.Helper()
		c := NewTokenCache(ttl, window)
		c.Live(t0)
		_, gen, _ := c.get(key, t0)
		c.put(key, owner, gen, t0)
		if _, _, ok := c.get(key, t0); !ok {
			t.Fatal("a fresh entry is not served")
		}
		return c
	}
	tests := []struct {
		name  string
		run   func(c *TokenCache) time.Time // changes c, returns when to look
		serve bool
	}{
		{"fresh, feed live", func(*TokenCache) time.Time { return t0.Add(500 * time.Millisecond) }, true},
		{"feed silent past the window", func(*TokenCache) time.Time { return t0.Add(window) }, false},
		{"feed kept checking in", func(c *TokenCache) time.Time {
			c.Live(t0.Add(5 * time.Second))
			return t0.Add(5*time.Second + 100*time.Millisecond)
		}, true},
		{"older than the TTL", func(c *TokenCache) time.Time { c.Live(t0.Add(ttl)); return t0.Add(ttl) }, false},
		{"its token changed", func(c *TokenCache) time.Time { c.Forget(AuthChange{Kind: AuthChangeToken, ID: 7}); return t0 }, false},
		{"another token changed", func(c *TokenCache) time.Time { c.Forget(AuthChange{Kind: AuthChangeToken, ID: 8}); return t0 }, true},
		{"its user changed", func(c *TokenCache) time.Time { c.Forget(AuthChange{Kind: AuthChangeUser, ID: 3}); return t0 }, false},
		{"another user changed", func(c *TokenCache) time.Time { c.Forget(AuthChange{Kind: AuthChangeUser, ID: 4}); return t0 }, true},
		{"a change of unknown kind", func(c *TokenCache) time.Time { c.Forget(AuthChange{Kind: "unknown"}); return t0 }, false},
		{"feed lost", func(c *TokenCache) time.Time { c.Lost(); return t0 }, false},
		{"feed lost and back: the entry is gone", func(c *TokenCache) time.Time {
			c.Lost()
			c.Live(t0.Add(time.Millisecond))
			return t0.Add(time.Millisecond)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := warm(t)
			at := tt.run(c)
			if _, _, ok := c.get(key, at); ok != tt.serve {
				t.Errorf("served = %v, want %v", ok, tt.serve)
			}
		})
	}

	t.Run("a look-up that raced a change is not stored", func(t *testing.T) {
		c := NewTokenCache(ttl, window)
		c.Live(t0)
		_, gen, _ := c.get(key, t0) // the look-up starts
		c.Forget(AuthChange{Kind: AuthChangeUser, ID: 3})
		c.put(key, owner, gen, t0) // and ends with what it read before the change
		if c.Holds("sf_token") {
			t.Error("a stale answer was stored")
		}
	})
	t.Run("nothing is stored or served while the feed is down", func(t *testing.T) {
		c := NewTokenCache(ttl, window)
		_, gen, ok := c.get(key, t0)
		c.put(key, owner, gen, t0)
		if ok || c.Len() != 0 {
			t.Errorf("served %v, holds %d entries before the feed was live", ok, c.Len())
		}
	})
	t.Run("bounded", func(t *testing.T) {
		c := NewTokenCache(ttl, window)
		c.Live(t0)
		for i := range maxCachedTokens + 10 {
			k := sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
			_, gen, _ := c.get(k, t0)
			c.put(k, owner, gen, t0)
		}
		if c.Len() > maxCachedTokens {
			t.Errorf("holds %d entries, want at most %d", c.Len(), maxCachedTokens)
		}
	})
	t.Run("a nil cache caches nothing", func(t *testing.T) {
		var c *TokenCache
		c.Live(t0)
		c.put(key, owner, 0, t0)
		c.Forget(AuthChange{})
		c.Lost()
		if _, _, ok := c.get(key, t0); ok || c.Len() != 0 {
			t.Error("a nil cache served something")
		}
	})
}

// fakeUsageStore records TouchTokens calls, failing while err is set.
type fakeUsageStore struct {
	calls [][]TokenUse
	err   error
}

func (f *fakeUsageStore) TouchTokens(_ context.Context, uses []TokenUse) error {
	if f.err != nil {
		return f.err
	}
	f.calls = append(f.calls, uses)
	return nil
}

func TestTokenUsage(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	st := &fakeUsageStore{}
	u := NewTokenUsage(st, time.Minute)

	// Many uses of one token between two flushes cost one write, of the latest use.
	for i := range 1000 {
		u.Record(1, t0.Add(time.Duration(i)*time.Millisecond))
	}
	u.Record(1, t0) // an older use arriving late does not move it back
	u.Record(2, t0)
	if at, ok := u.lastUse(1); !ok || !at.Equal(t0.Add(999*time.Millisecond)) {
		t.Fatalf("lastUse(1) = %v %v, want the latest use", at, ok)
	}
	if err := u.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(st.calls) != 1 || len(st.calls[0]) != 2 {
		t.Fatalf("flush wrote %v, want one statement for both tokens", st.calls)
	}
	if _, ok := u.lastUse(1); ok {
		t.Error("a written use is still pending")
	}
	if err := u.Flush(ctx); err != nil || len(st.calls) != 1 {
		t.Errorf("an idle flush wrote: %v %v", st.calls, err)
	}

	// A failed write keeps the use for the next flush.
	st.err = errors.New("database down")
	u.Record(3, t0)
	if err := u.Flush(ctx); err == nil {
		t.Fatal("the store's error was not returned")
	}
	st.err = nil
	if err := u.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if last := st.calls[len(st.calls)-1]; len(last) != 1 || last[0].TokenID != 3 {
		t.Errorf("after the failure, wrote %v, want token 3", last)
	}
}
