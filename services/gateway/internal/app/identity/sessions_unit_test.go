package identity

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// sweepStore is a SessionStore that counts the sweeps it is asked for.
type sweepStore struct {
	SessionStore
	expired, stale atomic.Int32
}

func (s *sweepStore) DeleteExpiredSessions(context.Context, time.Time) error {
	s.expired.Add(1)
	return nil
}

func (s *sweepStore) DeleteStaleLoginFailures(_ context.Context, now, windowStart time.Time) error {
	if !windowStart.Before(now) {
		panic("the window must start before now")
	}
	s.stale.Add(1)
	return nil
}

// TestUnitSessionSweeper: the sweeper forgets ended sessions and past sign-in counts
// on its own, at every tick, with nobody signing in (docs/WEB-UI.md, "Sessions": the
// table does not grow with the addresses tried).
func TestUnitSessionSweeper(t *testing.T) {
	st := &sweepStore{}
	s := NewSessions(st, nil, SessionConfig{Lockout: time.Minute, MaxFailures: 5})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.RunSweeper(ctx, 5*time.Millisecond, func(err error) { t.Error(err) }); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for st.stale.Load() < 3 || st.expired.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s: %d sweeps of counts, %d of sessions, want 3 each", st.stale.Load(), st.expired.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the sweeper did not stop with its context")
	}
}

// TestUnitLoginEmailKey: the throttle key of any address is short, and distinct
// addresses keep distinct keys; case and surrounding space do not matter.
func TestUnitLoginEmailKey(t *testing.T) {
	if got := LoginEmailKey("  Ann@Example.COM "); got != "email:ann@example.com" {
		t.Fatalf("key = %q", got)
	}
	long1, long2 := strings.Repeat("x", 40000)+"@a.example", strings.Repeat("x", 40000)+"@b.example"
	k1, k2 := LoginEmailKey(long1), LoginEmailKey(long2)
	if len(k1) > 100 || k1 == k2 || LoginEmailKey(strings.ToUpper(long1)) != k1 {
		t.Fatalf("long keys %q, %q", k1, k2)
	}
	at := strings.Repeat("y", app.MaxEmailLen-len("@example.com")) + "@example.com"
	if LoginEmailKey(at) != "email:"+at {
		t.Fatalf("an address of %d bytes is not kept as itself", len(at))
	}
}
