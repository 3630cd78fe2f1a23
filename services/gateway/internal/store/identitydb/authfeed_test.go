package identitydb_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/store/identitydb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/storetest"
)

// recordingFeed records what FollowAuthChanges reports.
type recordingFeed struct {
	mu      sync.Mutex
	changes []identity.AuthChange
	lives   []time.Time
	losts   int
}

func (f *recordingFeed) Forget(c identity.AuthChange) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, c)
}

func (f *recordingFeed) Live(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lives = append(f.lives, at)
}

func (f *recordingFeed) Lost() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.losts++
}

func (f *recordingFeed) snapshot() ([]identity.AuthChange, []time.Time, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]identity.AuthChange(nil), f.changes...), append([]time.Time(nil), f.lives...), f.losts
}

// TestFollowAuthChanges: the feed proves itself current several times a second on a
// healthy connection (its probes are no changes), and passes on each change of a user
// or of a token's owner, hash or expiry, but not a last_used_at write.
func TestFollowAuthChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	db := identitydb.NewStore(sqldb.NewDB(pool))
	feed := &recordingFeed{}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.FollowAuthChanges(fctx, feed, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })

	deadline := time.Now().Add(10 * time.Second)
	for _, lives, _ := feed.snapshot(); len(lives) == 0; _, lives, _ = feed.snapshot() {
		if time.Now().After(deadline) {
			t.Fatal("the feed never reported Live")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	changes, lives, losts := feed.snapshot()
	if len(lives) < 3 || losts != 1 || len(changes) != 0 {
		t.Fatalf("in a quiet second: %d Live, %d Lost, changes %v; want ≥ 3 Live, only the Lost after LISTEN, no change", len(lives), losts, changes)
	}
	for i := 1; i < len(lives); i++ {
		if gap := lives[i].Sub(lives[i-1]); gap > identity.DefaultTokenFeedWindow {
			t.Errorf("%s between two Live reports, over the cache's window %s", gap, identity.DefaultTokenFeedWindow)
		}
	}

	var userID, tokenID int64
	if err := pool.QueryRow(ctx, `INSERT INTO users (email, name, role) VALUES ('a@example.com', 'A', 'regular') RETURNING id`).Scan(&userID); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO api_tokens (user_id, name, prefix, token_hash) VALUES ($1, 't', 'sf_x', '\x01') RETURNING id`, userID).Scan(&tokenID); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`UPDATE api_tokens SET last_used_at = now() WHERE id = $1`, // not a change: no notification
		`UPDATE api_tokens SET expires_at = now() WHERE id = $1`,
		`DELETE FROM api_tokens WHERE id = $1`,
	} {
		if _, err := pool.Exec(ctx, sql, tokenID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE users SET disabled = true WHERE id = $1`, userID); err != nil {
		t.Fatal(err)
	}
	want := []identity.AuthChange{{Kind: identity.AuthChangeToken, ID: tokenID}, {Kind: identity.AuthChangeToken, ID: tokenID}, {Kind: identity.AuthChangeUser, ID: userID}}
	deadline = time.Now().Add(5 * time.Second)
	for {
		changes, _, _ := feed.snapshot()
		if len(changes) >= len(want) {
			if len(changes) != len(want) || changes[0] != want[0] || changes[1] != want[1] || changes[2] != want[2] {
				t.Fatalf("changes = %v, want %v", changes, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("changes = %v, want %v", changes, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
