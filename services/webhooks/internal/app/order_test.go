package app_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// TestOrderForgetAfter: the places of finished packages stay three times the retry
// schedule's total, and at least three days.
func TestOrderForgetAfter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		schedule []time.Duration
		want     time.Duration
	}{
		{"default schedule", []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour}, 72 * time.Hour},
		{"no retries", nil, 72 * time.Hour},
		{"a long schedule", []time.Duration{24 * time.Hour, 24 * time.Hour}, 6 * 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := app.OrderForgetAfter(tc.schedule); got != tc.want {
				t.Errorf("OrderForgetAfter = %s, want %s", got, tc.want)
			}
		})
	}
}

// forgetStore is an OrderStore whose ForgetDone has backlog places to remove.
type forgetStore struct {
	app.OrderStore
	backlog int
	after   time.Duration
	limits  []int
	err     error
}

func (s *forgetStore) ForgetDone(_ context.Context, after time.Duration, limit int) (int, error) {
	s.after = after
	s.limits = append(s.limits, limit)
	if s.err != nil {
		return 0, s.err
	}
	n := min(limit, s.backlog)
	s.backlog -= n
	return n, nil
}

// TestOrderForgetDone: one pass removes the places in batches until one is not full, no
// more than its bound (a backlog goes over several passes), and counts them.
func TestOrderForgetDone(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backlog int
		want    []int // removed by each of three passes
		calls   int   // statements of the first pass
	}{
		{"nothing to do", 0, []int{0, 0, 0}, 1},
		{"less than a batch", 10, []int{10, 0, 0}, 1},
		{"exactly a batch", 1000, []int{1000, 0, 0}, 2},
		{"a backlog", 45000, []int{20000, 20000, 5000}, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := app.NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			st := &forgetStore{backlog: tc.backlog}
			o := app.NewOrder(st, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), app.OrderOptions{ForgetAfter: 72 * time.Hour, Metrics: m})
			defer o.Close()
			total := 0
			for i, want := range tc.want {
				n, err := o.ForgetDone(context.Background())
				if err != nil || n != want {
					t.Fatalf("pass %d: %d %v, want %d", i+1, n, err, want)
				}
				if i == 0 && len(st.limits) != tc.calls {
					t.Errorf("first pass: %d statements (limits %v), want %d", len(st.limits), st.limits, tc.calls)
				}
				total += n
			}
			for _, l := range st.limits {
				if l <= 0 || l > 1000 {
					t.Errorf("a statement's limit %d, want 1 to 1000", l)
				}
			}
			if st.after != 72*time.Hour {
				t.Errorf("idle bound %s, want 72h", st.after)
			}
			if got := testutil.ToFloat64(m.OrderForgotten); got != float64(total) {
				t.Errorf("shipfile_webhook_order_places_removed_total = %v, want %d", got, total)
			}
		})
	}
	t.Run("an error", func(t *testing.T) {
		st := &forgetStore{err: errors.New("down")}
		o := app.NewOrder(st, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), app.OrderOptions{ForgetAfter: time.Hour})
		defer o.Close()
		if _, err := o.ForgetDone(context.Background()); !errors.Is(err, st.err) {
			t.Fatalf("err %v, want %v", err, st.err)
		}
	})
}
