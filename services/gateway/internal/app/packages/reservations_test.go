package packages

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// reservingStore records ReserveObjectKey calls; every other method of Store
// is left unimplemented.
type reservingStore struct {
	Store
	mu    sync.Mutex
	calls []string
	err   error
}

func (s *reservingStore) ReserveObjectKey(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, key)
	return s.err
}

func (s *reservingStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// TestHoldObjectKey: the key is reserved at once, renewed while held (even when the
// request's context is done: the commit decides), and no more after release.
func TestHoldObjectKey(t *testing.T) {
	st := &reservingStore{}
	p := NewPackages(st, nil, app.Limits{}, "")
	p.reservationRenewal = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	release, err := p.HoldObjectKey(ctx, "packages/a/b")
	if err != nil || st.count() != 1 {
		t.Fatalf("hold: %v, %d reservations", err, st.count())
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for st.count() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d reservations after 5s, want renewals every 10ms", st.count())
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	n := st.count()
	time.Sleep(50 * time.Millisecond)
	if st.count() != n {
		t.Fatal("renewed after release")
	}
	for _, k := range st.calls {
		if k != "packages/a/b" {
			t.Fatalf("reserved %q", k)
		}
	}

	st.err = errors.New("database down")
	if _, err := p.HoldObjectKey(context.Background(), "k"); err == nil {
		t.Fatal("a failed reservation must fail the upload before any byte is stored")
	}
}
