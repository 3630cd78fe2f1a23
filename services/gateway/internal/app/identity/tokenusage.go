package identity

import (
	"context"
	"sync"
	"time"
)

// DefaultTokenUsageInterval is how often a gateway writes the last_used_at of the
// tokens used since its previous write: at most once per interval per token.
const DefaultTokenUsageInterval = 10 * time.Second

// TokenUse is one token's latest use, as written to last_used_at.
type TokenUse struct {
	TokenID int64
	At      time.Time
}

// TokenUsageStore writes tokens' last_used_at in one statement, never moving one back.
type TokenUsageStore interface {
	TouchTokens(ctx context.Context, uses []TokenUse) error
}

// TokenUsage records API tokens' uses in memory and writes them to last_used_at in
// batches, off the request path, so a busy token costs no row update (and no lock on
// its row) per request. Uses not yet written still show in Identity.ListTokens of the
// same instance.
type TokenUsage struct {
	store    TokenUsageStore
	interval time.Duration

	mu      sync.Mutex
	pending map[int64]time.Time
}

// NewTokenUsage returns a recorder writing to store every interval (default
// DefaultTokenUsageInterval when ≤ 0) once Run runs.
func NewTokenUsage(store TokenUsageStore, interval time.Duration) *TokenUsage {
	if interval <= 0 {
		interval = DefaultTokenUsageInterval
	}
	return &TokenUsage{store: store, interval: interval, pending: map[int64]time.Time{}}
}

// Record notes that the token was used at at.
func (u *TokenUsage) Record(tokenID int64, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if prev, ok := u.pending[tokenID]; !ok || at.After(prev) {
		u.pending[tokenID] = at
	}
}

// lastUse returns the token's latest use not yet written, if any.
func (u *TokenUsage) lastUse(tokenID int64) (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	at, ok := u.pending[tokenID]
	return at, ok
}

// Flush writes the uses recorded so far. Uses whose write failed are kept for the next
// flush (unless a later use replaced them).
func (u *TokenUsage) Flush(ctx context.Context) error {
	u.mu.Lock()
	if len(u.pending) == 0 {
		u.mu.Unlock()
		return nil
	}
	uses := make([]TokenUse, 0, len(u.pending))
	for id, at := range u.pending {
		uses = append(uses, TokenUse{TokenID: id, At: at})
	}
	u.mu.Unlock()

	if err := u.store.TouchTokens(ctx, uses); err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, use := range uses {
		if at, ok := u.pending[use.TokenID]; ok && !at.After(use.At) {
			delete(u.pending, use.TokenID)
		}
	}
	return nil
}

// Run flushes every interval until ctx is cancelled, then flushes once more (bounded
// by a few seconds) and returns. Failed writes are reported to onError (may be nil)
// and retried at the next tick.
func (u *TokenUsage) Run(ctx context.Context, onError func(error)) {
	tick := time.NewTicker(u.interval)
	defer tick.Stop()
	report := func(err error) {
		if err != nil && onError != nil {
			onError(err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			report(u.Flush(fctx))
			return
		case <-tick.C:
			report(u.Flush(ctx))
		}
	}
}
