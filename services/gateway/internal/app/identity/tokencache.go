package identity

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Defaults of the token cache.
const (
	// DefaultTokenCacheTTL is how long a token's owner is served from memory at most,
	// whatever the change feed says.
	DefaultTokenCacheTTL = 10 * time.Second
	// DefaultTokenFeedWindow is how recently the change feed must have proved itself
	// current for a cached owner to be served. A feed that checks in more often than
	// this (identitydb.Store.FollowAuthChanges probes itself every 200 ms) keeps the
	// cache on; a stalled or lost feed turns it off within the window, and every
	// request reads the database again. A change committed at T is therefore honoured on every
	// instance by T + the window at the latest.
	DefaultTokenFeedWindow = 750 * time.Millisecond
	// maxCachedTokens bounds the cache's memory: past it, the cache starts over.
	maxCachedTokens = 10_000
)

// AuthChange is one change to a token or user that the cache must forget.
type AuthChange struct {
	// Kind is what changed: AuthChangeToken or AuthChangeUser; anything else (an
	// unreadable notification) empties the whole cache.
	Kind string
	// ID is the token's or the user's id.
	ID int64
}

// The kinds of AuthChange.
const (
	AuthChangeToken = "token"
	AuthChangeUser  = "user"
)

// TokenCache keeps the owners of recently used API tokens in memory, so a busy token
// costs no database look-up per request. It serves an entry only while its change feed
// is current: the feed (identitydb.Store.FollowAuthChanges, on PostgreSQL LISTEN) calls
// Forget for every committed change to a token or user (revoked, expiry changed, user
// disabled, role or password changed), Live after each proof that its connection is up
// to date, and Lost when the connection drops (the cache then empties and serves
// nothing until the feed is back). Expiry is checked at every use by
// Identity.Authenticate, cached or not. Failed look-ups are never cached.
//
// The zero value is not usable; call NewTokenCache. A nil *TokenCache caches nothing.
type TokenCache struct {
	ttl, window time.Duration

	mu      sync.Mutex
	entries map[[sha256.Size]byte]cachedOwner
	// gen counts invalidations; a look-up that started before one does not store its
	// (possibly stale) answer.
	gen uint64
	// liveAt is when the feed last proved itself current; zero while it is down.
	liveAt time.Time
}

type cachedOwner struct {
	owner app.TokenOwner
	at    time.Time
}

// NewTokenCache returns an empty cache whose entries live at most ttl, served only while
// the feed checked in within window (defaults for values ≤ 0). It serves nothing until
// its feed calls Live.
func NewTokenCache(ttl, window time.Duration) *TokenCache {
	if ttl <= 0 {
		ttl = DefaultTokenCacheTTL
	}
	if window <= 0 {
		window = DefaultTokenFeedWindow
	}
	return &TokenCache{ttl: ttl, window: window, entries: map[[sha256.Size]byte]cachedOwner{}}
}

// get returns the cached owner of the token hash, if it may be served at now, and the
// generation a look-up started now must present to put.
func (c *TokenCache) get(sum [sha256.Size]byte, now time.Time) (app.TokenOwner, uint64, bool) {
	if c == nil {
		return app.TokenOwner{}, 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.liveLocked(now) {
		return app.TokenOwner{}, c.gen, false
	}
	e, ok := c.entries[sum]
	if !ok || now.Sub(e.at) >= c.ttl || now.Before(e.at) {
		return app.TokenOwner{}, c.gen, false
	}
	return e.owner, c.gen, true
}

// put stores what a look-up started at generation gen found, unless something was
// invalidated since or the feed is down.
func (c *TokenCache) put(sum [sha256.Size]byte, owner app.TokenOwner, gen uint64, now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || !c.liveLocked(now) {
		return
	}
	if len(c.entries) >= maxCachedTokens {
		clear(c.entries)
	}
	c.entries[sum] = cachedOwner{owner: owner, at: now}
}

func (c *TokenCache) liveLocked(now time.Time) bool {
	return !c.liveAt.IsZero() && now.Sub(c.liveAt) < c.window
}

// Forget drops the entries a change concerns: a token's, or every token of a user.
func (c *TokenCache) Forget(ch AuthChange) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	switch ch.Kind {
	case AuthChangeToken:
		for k, e := range c.entries {
			if e.owner.TokenID == ch.ID {
				delete(c.entries, k)
			}
		}
	case AuthChangeUser:
		for k, e := range c.entries {
			if e.owner.User.ID == ch.ID {
				delete(c.entries, k)
			}
		}
	default:
		clear(c.entries)
	}
}

// Live records that the feed was current at at: every change committed before at has
// been passed to Forget.
func (c *TokenCache) Live(at time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.After(c.liveAt) {
		c.liveAt = at
	}
}

// Lost records that the feed is down: changes may be missed, so the cache empties and
// serves nothing until Live is called again (after the feed re-subscribed).
func (c *TokenCache) Lost() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.liveAt = time.Time{}
	clear(c.entries)
}

// Holds reports whether the cache holds the owner of the raw token (for tests).
func (c *TokenCache) Holds(raw string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[sha256.Sum256([]byte(raw))]
	return ok
}

// Len returns how many entries the cache holds (for metrics and tests).
func (c *TokenCache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
