// Package store keeps the dispatcher's state in PostgreSQL (pgx/v5): webhook
// subscriptions (read, and pushed changes on LISTEN), deliveries and the attempt log,
// written many at a time. The gateway owns the schema.
package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// NotifyChannel is the PostgreSQL channel on which every change of a subscription that
// matters to deliveries is announced (payload: its id), by a trigger on
// webhook_subscriptions (migration 00007).
const NotifyChannel = "shipfile_webhooks"

// Postgres is the dispatcher's store.
type Postgres struct {
	pool    *pgxpool.Pool
	secrets SecretOpener
}

var (
	_ app.SubscriptionStore = (*Postgres)(nil)
	_ app.FanoutStore       = (*Postgres)(nil)
	_ app.DeliveryStore     = (*Postgres)(nil)
	_ app.HealthStore       = (*Postgres)(nil)
)

// New returns a store on pool; secrets opens the subscriptions' sealed signing secrets.
func New(pool *pgxpool.Pool, secrets SecretOpener) *Postgres {
	return &Postgres{pool: pool, secrets: secrets}
}

// Subscriptions returns every subscription.
func (p *Postgres) Subscriptions(ctx context.Context) ([]app.Subscription, error) {
	rows, err := p.pool.Query(ctx, qSubscriptions)
	if err != nil {
		return nil, fmt.Errorf("store: subscriptions: %w", err)
	}
	subs, err := pgx.CollectRows(rows, p.scanSubscription)
	if err != nil {
		return nil, fmt.Errorf("store: subscriptions: %w", err)
	}
	return subs, nil
}

// Subscription returns one subscription; app.ErrNotFound when it does not exist.
func (p *Postgres) Subscription(ctx context.Context, id int64) (app.Subscription, error) {
	rows, err := p.pool.Query(ctx, qSubscription, id)
	if err != nil {
		return app.Subscription{}, fmt.Errorf("store: subscription %d: %w", id, err)
	}
	s, err := pgx.CollectExactlyOneRow(rows, p.scanSubscription)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.Subscription{}, app.ErrNotFound
	}
	if err != nil {
		return app.Subscription{}, fmt.Errorf("store: subscription %d: %w", id, err)
	}
	return s, nil
}

// scanSubscription reads one row of subscriptionColumns. It is the one place where the
// dispatcher reads the secret and previous_secret columns, which it opens
// (openSecrets: the gateway stores them sealed).
func (p *Postgres) scanSubscription(row pgx.CollectableRow) (app.Subscription, error) {
	var (
		s          app.Subscription
		prevSecret *string
		prevUntil  *time.Time
		rateLimit  *int32
		maxFlight  int32
	)
	err := row.Scan(&s.ID, &s.URL, &s.Events, &s.Secret, &prevSecret, &prevUntil, &s.Active, &s.CreatedAt,
		&maxFlight, &rateLimit)
	if err != nil {
		return app.Subscription{}, err
	}
	if prevSecret != nil {
		s.PreviousSecret = *prevSecret
	}
	if prevUntil != nil {
		s.PreviousSecretUntil = *prevUntil
	}
	s.MaxInFlight = int(maxFlight)
	if rateLimit != nil {
		s.RateLimit = int(*rateLimit)
	}
	if err := p.openSecrets(&s); err != nil {
		// One subscription's unreadable secret must not stop the others: it is marked.
		s.Secret, s.PreviousSecret, s.SecretError = "", "", err
	}
	return s, nil
}

// LastSubscriptionID returns the highest subscription id, 0 when there is none: the
// fan-out's cheap check that its cache has every subscription created so far.
func (p *Postgres) LastSubscriptionID(ctx context.Context) (int64, error) {
	var id int64
	if err := p.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM webhook_subscriptions`).Scan(&id); err != nil {
		return 0, fmt.Errorf("store: last subscription id: %w", err)
	}
	return id, nil
}

// Listen announces on changed the id of every subscription changed, created or
// deleted, from a connection of its own that LISTENs on NotifyChannel, until ctx is
// done or the connection fails (the error says why). connected is called once the
// connection listens, before any announcement: what changed before may be missed, so
// the caller reloads everything then.
func (p *Postgres) Listen(ctx context.Context, connected func(), changed func(id int64)) error {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store: listen: %w", err)
	}
	// The connection leaves the pool: a LISTENing session must not serve other queries.
	pc := conn.Hijack()
	defer pc.Close(context.WithoutCancel(ctx))
	if _, err := pc.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return fmt.Errorf("store: listen: %w", err)
	}
	connected()
	for {
		// A connection that died without a word (a partition) would leave the cache
		// believing itself current: wait at most listenPing, then ping.
		wctx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := pc.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			if id, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
				changed(id)
			}
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			pctx, cancel := context.WithTimeout(ctx, listenPing)
			err = pc.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("store: listen: ping: %w", err)
			}
		default:
			return fmt.Errorf("store: listen: %w", err)
		}
	}
}

// listenPing is how long the LISTEN connection waits for a notification before it
// checks that it is alive; a dead one is noticed within twice that.
const listenPing = 400 * time.Millisecond

// InsertDeliveries inserts the deliveries in one statement; those that exist (an event
// fanned out again) are left alone.
func (p *Postgres) InsertDeliveries(ctx context.Context, ds []app.NewDelivery) error {
	if len(ds) == 0 {
		return nil
	}
	ids, subs := make([]string, len(ds)), make([]int64, len(ds))
	evIDs, types, bodies := make([]string, len(ds)), make([]string, len(ds)), make([][]byte, len(ds))
	for i, d := range ds {
		ids[i], subs[i], evIDs[i], types[i], bodies[i] = d.ID, d.SubscriptionID, d.EventID, d.Event, d.Body
	}
	if _, err := p.pool.Exec(ctx, qInsertDeliveries, ids, subs, evIDs, types, bodies); err != nil {
		return fmt.Errorf("store: insert %d deliveries: %w", len(ds), err)
	}
	return nil
}

// Deliveries returns the deliveries with these ids that exist, by id (without their
// subscriptions).
func (p *Postgres) Deliveries(ctx context.Context, ids []string) (map[string]app.Delivery, error) {
	rows, err := p.pool.Query(ctx, qDeliveries, ids)
	if err != nil {
		return nil, fmt.Errorf("store: %d deliveries: %w", len(ids), err)
	}
	ds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (app.Delivery, error) {
		var d app.Delivery
		err := row.Scan(&d.ID, &d.SubscriptionID, &d.EventID, &d.Event, &d.Body, &d.Status, &d.Attempts, &d.RoundAttempts)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: %d deliveries: %w", len(ids), err)
	}
	out := make(map[string]app.Delivery, len(ds))
	for _, d := range ds {
		out[d.ID] = d
	}
	return out, nil
}

// MarkFailed sets a delivery that has not succeeded failed with reason.
func (p *Postgres) MarkFailed(ctx context.Context, id, reason string) error {
	tag, err := p.pool.Exec(ctx, qMarkFailed, id, reason)
	if err != nil {
		return fmt.Errorf("store: mark delivery %s failed: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return app.ErrNotFound
	}
	return nil
}

// RecordAttempts writes the attempts and their deliveries' new states in one statement
// per group of distinct deliveries (one, unless a delivery appears twice) and returns
// each attempt's number by delivery id; a delivery that is gone has none.
func (p *Postgres) RecordAttempts(ctx context.Context, recs []app.AttemptRecord) (map[string]int, error) {
	out := make(map[string]int, len(recs))
	for len(recs) > 0 {
		// Rows in id order, the same lock order in every statement; a second attempt of
		// one delivery goes to the next statement.
		seen := make(map[string]bool, len(recs))
		var now, later []app.AttemptRecord
		for _, r := range recs {
			if seen[r.DeliveryID] {
				later = append(later, r)
				continue
			}
			seen[r.DeliveryID] = true
			now = append(now, r)
		}
		slices.SortFunc(now, func(a, b app.AttemptRecord) int {
			if a.DeliveryID < b.DeliveryID {
				return -1
			}
			if a.DeliveryID > b.DeliveryID {
				return 1
			}
			return 0
		})
		if err := p.recordAttempts(ctx, now, out); err != nil {
			return nil, err
		}
		recs = later
	}
	return out, nil
}

func (p *Postgres) recordAttempts(ctx context.Context, recs []app.AttemptRecord, out map[string]int) error {
	n := len(recs)
	ids, subs, statuses := make([]string, n), make([]int64, n), make([]string, n)
	codes, durations := make([]*int32, n), make([]int32, n)
	errs, excerpts := make([]*string, n), make([]*string, n)
	for i, r := range recs {
		ids[i], subs[i], statuses[i] = r.DeliveryID, r.SubscriptionID, r.Status
		if r.StatusCode != 0 {
			c := int32(r.StatusCode)
			codes[i] = &c
		}
		durations[i] = int32(min(r.Duration.Milliseconds(), 1<<31-1))
		if r.Error != "" {
			e := r.Error
			errs[i] = &e
		}
		if r.HasResponse {
			x := r.Excerpt
			excerpts[i] = &x
		}
	}
	rows, err := p.pool.Query(ctx, qRecordAttempts, ids, subs, codes, errs, statuses, durations, excerpts)
	if err != nil {
		return fmt.Errorf("store: record %d attempts: %w", n, err)
	}
	var id string
	var attempt int
	_, err = pgx.ForEachRow(rows, []any{&id, &attempt}, func() error {
		out[id] = attempt
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: record %d attempts: %w", n, err)
	}
	return nil
}

// DisableSubscription disables an active subscription with reason.
func (p *Postgres) DisableSubscription(ctx context.Context, id int64, reason string) error {
	if _, err := p.pool.Exec(ctx, qDisableSubscription, id, reason); err != nil {
		return fmt.Errorf("store: disable subscription %d: %w", id, err)
	}
	return nil
}

// Health derives the subscriptions' last success and failing streak from the attempts
// of the last window, disables those failing for disableAfter or longer (unless 0)
// with reason, and returns their ids; in one transaction, skipped (ran false) while
// another instance runs it.
func (p *Postgres) Health(ctx context.Context, window, disableAfter time.Duration, reason string) (disabled []int64, ran bool, err error) {
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, qHealthLock).Scan(&ran); err != nil || !ran {
			return err
		}
		if _, err := tx.Exec(ctx, qHealth, window); err != nil {
			return err
		}
		if disableAfter <= 0 {
			return nil
		}
		rows, err := tx.Query(ctx, qDisableFailing, disableAfter, reason)
		if err != nil {
			return err
		}
		disabled, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: health pass: %w", err)
	}
	return disabled, ran, nil
}

// DeleteDeliveriesOf removes the deliveries and attempts of the subscriptions among
// ids that no longer exist (a fan-out that raced their deletion), and returns how many.
func (p *Postgres) DeleteDeliveriesOf(ctx context.Context, ids []int64) (int64, error) {
	tag, err := p.pool.Exec(ctx, qDeleteDeliveriesOf, ids)
	if err != nil {
		return 0, fmt.Errorf("store: delete deliveries of deleted subscriptions: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Heartbeat records the instance as alive and returns how many instances are, itself
// included; an instance not seen for ttl is forgotten.
func (p *Postgres) Heartbeat(ctx context.Context, instanceID string, ttl time.Duration) (int, error) {
	var others int
	if err := p.pool.QueryRow(ctx, qHeartbeat, instanceID, ttl).Scan(&others); err != nil {
		return 0, fmt.Errorf("store: heartbeat: %w", err)
	}
	return others + 1, nil
}

// Leave forgets the instance (a clean stop).
func (p *Postgres) Leave(ctx context.Context, instanceID string) error {
	if _, err := p.pool.Exec(ctx, qLeave, instanceID); err != nil {
		return fmt.Errorf("store: leave: %w", err)
	}
	return nil
}

// OldestPending returns the age of the oldest pending delivery, 0 when none is.
func (p *Postgres) OldestPending(ctx context.Context) (time.Duration, error) {
	var secs float64
	if err := p.pool.QueryRow(ctx, qOldestPending).Scan(&secs); err != nil {
		return 0, fmt.Errorf("store: oldest pending delivery: %w", err)
	}
	return time.Duration(secs * float64(time.Second)), nil
}
