package store_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/store"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

// TestSweepLogRemovesWhatIsPastRetention: attempts older than the delivery log's
// retention (SHIPFILE_WEBHOOK_LOG_RETENTION) go, batch after batch, and so do the
// deliveries created and last changed before it that are no longer pending; a pending
// delivery, one redelivered since and the young ones stay, with their young attempts.
// The deliveries go without their trigger looking for attempts (the sweep removed those
// by age), and the trigger still removes a delivery's attempts on every other DELETE.
func TestSweepLogRemovesWhatIsPastRetention(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool, servicetest.Keyring(t))
	ctx := context.Background()
	hook := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://a.example/hook", Secret: "whsec_a"})
	const old, young = "100 days", "0 days"
	delivery := func(status, created, updated string, attempts ...string) string {
		t.Helper()
		id := uuid.NewString()
		if _, err := pool.Exec(ctx, `INSERT INTO webhook_deliveries (id, subscription_id, event_id, event, body, status, created_at, updated_at)
			VALUES ($1::uuid, $2, $1::text, 'package.created', '{}', $3, now() - $4::interval, now() - $5::interval)`, id, hook, status, created, updated); err != nil {
			t.Fatal(err)
		}
		for i, age := range attempts {
			if _, err := pool.Exec(ctx, `INSERT INTO webhook_attempts (delivery_id, subscription_id, attempt, status_code, duration_ms, created_at)
				VALUES ($1, $2, $3, 200, 1, now() - $4::interval)`, id, hook, i+1, age); err != nil {
				t.Fatal(err)
			}
		}
		return id
	}
	done := delivery("succeeded", old, old, old, old)
	pending := delivery("pending", old, old, old)
	redelivered := delivery("succeeded", old, young, old, young)
	fresh := delivery("succeeded", young, young, young)
	failed := delivery("failed", old, old) // failed without an attempt (its subscription was disabled)
	// Not a state the dispatcher writes (an attempt is never younger than its delivery's
	// updated_at): it shows that the sweep's DELETE leaves attempts to the sweep.
	odd := delivery("succeeded", old, old, young)
	count := func(sql, id string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, sql, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deliveries := func(id string) int { return count(`SELECT count(*) FROM webhook_deliveries WHERE id = $1`, id) }
	attempts := func(id string) int { return count(`SELECT count(*) FROM webhook_attempts WHERE delivery_id = $1`, id) }

	metrics, err := app.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	health := app.NewHealth(st, nil, nil, slog.New(slog.DiscardHandler), app.HealthOptions{
		LogRetention: 90 * 24 * time.Hour, LogBatch: 2, Metrics: metrics,
	})
	a, d, err := health.SweepLog(ctx, time.Minute)
	if err != nil || a != 4 || d != 3 {
		t.Fatalf("sweep: %d attempts and %d deliveries removed (%v), want 4 and 3", a, d, err)
	}
	for _, c := range []struct {
		name                string
		id                  string
		delivery, attempted int
	}{
		{"done long ago", done, 0, 0},
		{"pending", pending, 1, 0},
		{"redelivered since", redelivered, 1, 1},
		{"young", fresh, 1, 1},
		{"failed long ago", failed, 0, 0},
		{"an attempt younger than its delivery's last change", odd, 0, 1},
	} {
		if d, a := deliveries(c.id), attempts(c.id); d != c.delivery || a != c.attempted {
			t.Errorf("%s: %d deliveries and %d attempts left, want %d and %d", c.name, d, a, c.delivery, c.attempted)
		}
	}
	if got := testutil.ToFloat64(metrics.LogRemoved.WithLabelValues(app.LogAttempts)); got != 4 {
		t.Errorf("attempts removed = %v, want 4", got)
	}
	if got := testutil.ToFloat64(metrics.LogRemoved.WithLabelValues(app.LogDeliveries)); got != 3 {
		t.Errorf("deliveries removed = %v, want 3", got)
	}
	if a, d, err := health.SweepLog(ctx, time.Minute); err != nil || a != 0 || d != 0 {
		t.Fatalf("a second sweep: %d attempts and %d deliveries removed (%v), want none", a, d, err)
	}
	// Outside the sweep's transaction the trigger works as before.
	if _, err := pool.Exec(ctx, `DELETE FROM webhook_deliveries WHERE id = $1`, fresh); err != nil {
		t.Fatal(err)
	}
	if a := attempts(fresh); a != 0 {
		t.Fatalf("%d attempts left of a delivery deleted outside the sweep, want 0", a)
	}
}
