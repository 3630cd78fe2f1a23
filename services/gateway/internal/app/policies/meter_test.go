package policies

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// reserveStore is a Store of one user's running total: Reserve takes bytes when they
// fit under the quota, each call waiting for gate when it is set. What the meter does
// not use is left to the embedded nil Store.
type reserveStore struct {
	Store
	policy Policy

	mu       sync.Mutex
	reserved int64
	calls    int
	waiting  int // calls waiting at the gate
	gate     chan struct{}
}

func (s *reserveStore) UserPolicies(context.Context, int64) ([]Policy, Policy, error) {
	return nil, s.policy, nil
}

func (s *reserveStore) Reserve(_ context.Context, _ Reservation, bytes int64, quota *int64, _ int64, _ bool) (Usage, int64, bool, error) {
	s.mu.Lock()
	gate := s.gate
	if gate != nil {
		s.waiting++
	}
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if quota != nil && s.reserved+bytes > *quota {
		return Usage{ReservedBytes: s.reserved}, 0, false, nil
	}
	s.reserved += bytes
	return Usage{ReservedBytes: s.reserved}, 0, true, nil
}

func (s *reserveStore) setGate(g chan struct{}) {
	s.mu.Lock()
	s.gate = g
	s.mu.Unlock()
}

func (s *reserveStore) waitingCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

func (s *reserveStore) total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserved
}

// within runs fn and says whether it returned within d.
func within(d time.Duration, fn func()) bool {
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func newMeter(t *testing.T, quota, step int64) (*Meter, *reserveStore) {
	t.Helper()
	st := &reserveStore{policy: Policy{StorageQuotaBytes: &quota}}
	m, err := New(st).StartMeter(context.Background(), 1, 0, "packages/p/f", step)
	if err != nil || m == nil {
		t.Fatalf("StartMeter = %v, %v", m, err)
	}
	return m, st
}

func TestMeterReservesAhead(t *testing.T) {
	ctx := context.Background()
	m, st := newMeter(t, 1<<20, 100)
	take := func(n int64) error { return m.Take(ctx, n) }

	// The first bytes hold a step before they go on.
	if err := take(10); err != nil || st.total() != 100 {
		t.Fatalf("first Take: %v, %d held; want nil, 100", err, st.total())
	}
	// From here every reservation waits at the gate: the meter's stream must not.
	gate := make(chan struct{})
	st.setGate(gate)
	if err := take(40); err != nil { // 50 read, 50 ahead: nothing reserved yet
		t.Fatal(err)
	}
	if err := take(10); err != nil { // 60 read, 40 ahead: the next step starts in the background
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for st.waitingCalls() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no reservation started once less than half a step was left ahead")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var err error
	if !within(time.Second, func() { err = take(30) }) || err != nil { // 90 read, still held
		t.Fatalf("a Take within what is held waited for the reservation ahead (err %v)", err)
	}
	// 110 read: more than held until the step ahead is in; the bytes wait for it.
	done := make(chan error, 1)
	go func() { done <- take(20) }()
	select {
	case err := <-done:
		t.Fatalf("a Take past what is held returned (%v) before its reservation", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Take did not return once the reservation was in")
	}
	m.Settle()
	if got := st.total(); got < m.read || got > m.read+m.step*3/2 {
		t.Errorf("%d held for %d read, want at least what is read and at most a step and a half ahead", got, m.read)
	}
}

func TestMeterNeverPassesTheQuota(t *testing.T) {
	for _, tc := range []struct {
		name        string
		quota, step int64
		chunk       int64
	}{
		{"step divides the quota", 1000, 100, 7},
		{"near the quota the bytes take what they need", 450, 100, 13},
		{"chunks larger than a step", 1000, 100, 170},
		{"a step larger than the quota", 300, 1000, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m, st := newMeter(t, tc.quota, tc.step)
			var stored int64
			for stored < 2*tc.quota {
				err := m.Take(ctx, tc.chunk)
				if err != nil {
					if app.KindOf(err) != app.KindTooLarge {
						t.Fatalf("Take: %v, want a 413", err)
					}
					break
				}
				stored += tc.chunk
				// What is stored is held before it goes on, never more than the quota.
				if held := st.total(); held < stored || held > tc.quota {
					t.Fatalf("%d held with %d stored (quota %d)", held, stored, tc.quota)
				}
			}
			if stored > tc.quota || stored+tc.chunk <= tc.quota {
				t.Errorf("refused after %d bytes in chunks of %d: want the last chunk that fits under %d", stored, tc.chunk, tc.quota)
			}
			m.Release(ctx)
		})
	}
}

func (s *reserveStore) ReleaseHold(context.Context, uuid.UUID) error { return nil }
