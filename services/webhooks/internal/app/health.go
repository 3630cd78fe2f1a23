package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// HealthStore is what the health pass and the instance heartbeat need of the database.
type HealthStore interface {
	// Health derives last success and failing streaks from the attempts of the last
	// window and disables the subscriptions failing for disableAfter (unless 0) with
	// reason, returning their ids; ran is false when another instance runs it.
	Health(ctx context.Context, window, disableAfter time.Duration, reason string) (disabled []int64, ran bool, err error)
	// DeleteDeliveriesOf removes the deliveries of the subscriptions among ids that no
	// longer exist.
	DeleteDeliveriesOf(ctx context.Context, ids []int64) (int64, error)
	// Heartbeat records the instance as alive and returns how many are (ttl: how long
	// one stays counted without a heartbeat).
	Heartbeat(ctx context.Context, instanceID string, ttl time.Duration) (int, error)
	// Leave forgets the instance.
	Leave(ctx context.Context, instanceID string) error
	// RemoveOldAttempts removes attempts older than retention among the limit oldest
	// (skipping rows another instance holds) and returns how many it removed.
	RemoveOldAttempts(ctx context.Context, retention time.Duration, limit int) (int, error)
	// RemoveOldDeliveries removes up to limit deliveries created and last changed longer
	// than retention ago and no longer pending, leaving their attempts (all older) to
	// RemoveOldAttempts, and returns how many it removed.
	RemoveOldDeliveries(ctx context.Context, retention time.Duration, limit int) (int, error)
}

// HealthOptions tune a Health.
type HealthOptions struct {
	// Interval is the period of the health pass and of the heartbeat (default 5s).
	Interval time.Duration
	// DisableAfter: a subscription whose deliveries have all failed for this long is
	// disabled (0: never).
	DisableAfter time.Duration
	// InstanceID names this instance in the heartbeat.
	InstanceID string
	// LogRetention: attempts older than this are removed, and then the deliveries no
	// longer pending and unchanged for as long (0: kept for ever).
	LogRetention time.Duration
	// LogBatch is the most rows one statement of the retention's sweep removes
	// (default 500).
	LogBatch int
	// Metrics, when not nil, counts what the retention removed.
	Metrics *Metrics
}

// Kinds of the delivery log, the kind label of shipfile_webhook_log_removed_total.
const (
	LogAttempts   = "attempts"
	LogDeliveries = "deliveries"
)

// logSweepEvery is how often an instance sweeps the delivery log past its retention.
const logSweepEvery = time.Minute

// Health keeps what no delivery should write on its way: each subscription's
// last_success_at and failing_since, derived from the attempt log every Interval (one
// instance at a time), the disabling of subscriptions failing for DisableAfter, the
// removal of the deliveries of deleted subscriptions an attempt wrote meanwhile, and the
// count of live instances that share each rate_limit.
type Health struct {
	store HealthStore
	subs  *Subscriptions
	rates *RateLimiter
	opts  HealthOptions
	log   *slog.Logger
	// sweep holds the ids of deleted subscriptions, swept on two passes (an attempt
	// under way when the deletion was announced may write after the first).
	sweep [2][]int64
	// logSwept is when this instance last swept the delivery log.
	logSwept time.Time
}

// NewHealth returns the health keeper of one instance.
func NewHealth(store HealthStore, subs *Subscriptions, rates *RateLimiter, log *slog.Logger, opts HealthOptions) *Health {
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.LogBatch <= 0 {
		opts.LogBatch = 500
	}
	return &Health{store: store, subs: subs, rates: rates, opts: opts, log: log}
}

// Interval returns the period of Pass and Heartbeat.
func (h *Health) Interval() time.Duration { return h.opts.Interval }

// DisableReason is the disabled_reason of a subscription failing for too long.
func (h *Health) DisableReason() string {
	return "every delivery failed for " + humanDuration(h.opts.DisableAfter)
}

// Pass runs one health pass.
func (h *Health) Pass(ctx context.Context) {
	// Overlapping windows: an attempt committed late is still seen, and seeing one
	// twice changes nothing.
	window := max(time.Minute, 10*h.opts.Interval)
	disabled, ran, err := h.store.Health(ctx, window, h.opts.DisableAfter, h.DisableReason())
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("health pass", "err", err)
		}
		return
	}
	for _, id := range disabled {
		h.log.Warn("subscription disabled", "hook_id", id, "reason", h.DisableReason())
	}
	h.sweep[1], h.sweep[0] = h.sweep[0], h.subs.TakeDeleted()
	if ids := append(append([]int64(nil), h.sweep[0]...), h.sweep[1]...); len(ids) > 0 {
		if n, err := h.store.DeleteDeliveriesOf(ctx, ids); err != nil {
			h.log.Warn("delete deliveries of deleted subscriptions", "err", err)
		} else if n > 0 {
			h.log.Info("deleted deliveries of deleted subscriptions", "deliveries", n, "hook_ids", ids)
		}
	}
	for _, id := range h.sweep[0] {
		h.rates.Forget(id)
	}
	if ran && h.opts.LogRetention > 0 && time.Since(h.logSwept) >= logSweepEvery {
		h.logSwept = time.Now()
		attempts, deliveries, err := h.SweepLog(ctx, h.opts.Interval/2)
		switch {
		case err != nil && ctx.Err() == nil:
			h.log.Warn("remove the delivery log past its retention", "err", err)
		case attempts > 0 || deliveries > 0:
			h.log.Info("removed the delivery log past its retention", "attempts", attempts, "deliveries", deliveries)
		}
	}
}

// SweepLog removes the attempts older than LogRetention, then the deliveries created
// and last changed before that and no longer pending (whose attempts are older still:
// removed first), batch by batch, for at most budget (a log of years goes over several
// sweeps, and the health pass waits for none), and returns how many of each it removed.
func (h *Health) SweepLog(ctx context.Context, budget time.Duration) (attempts, deliveries int, err error) {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	for _, kind := range []struct {
		name   string
		remove func(context.Context, time.Duration, int) (int, error)
		count  *int
	}{
		{LogAttempts, h.store.RemoveOldAttempts, &attempts},
		{LogDeliveries, h.store.RemoveOldDeliveries, &deliveries},
	} {
		for ctx.Err() == nil {
			n, err := kind.remove(ctx, h.opts.LogRetention, h.opts.LogBatch)
			*kind.count += n
			if h.opts.Metrics != nil {
				h.opts.Metrics.LogRemoved.WithLabelValues(kind.name).Add(float64(n))
			}
			if err != nil {
				if ctx.Err() != nil {
					return attempts, deliveries, nil // the budget is spent: the next sweep goes on
				}
				return attempts, deliveries, fmt.Errorf("remove old %s: %w", kind.name, err)
			}
			if n < h.opts.LogBatch {
				break
			}
		}
	}
	return attempts, deliveries, nil
}

// Heartbeat tells the others this instance is alive and updates the count of live
// instances the rate limits are shared by.
func (h *Health) Heartbeat(ctx context.Context) {
	n, err := h.store.Heartbeat(ctx, h.opts.InstanceID, 3*h.opts.Interval)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("heartbeat", "err", err)
		}
		return
	}
	h.rates.SetInstances(n)
}

// Leave forgets this instance at a clean stop, so the others take its share at once.
func (h *Health) Leave(ctx context.Context) {
	if err := h.store.Leave(ctx, h.opts.InstanceID); err != nil {
		h.log.Warn("leave", "err", err)
	}
}
