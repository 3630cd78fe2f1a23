// Package store keeps the dispatcher's state in PostgreSQL (pgx/v5): webhook
// subscriptions (read), deliveries and the attempt log. The gateway owns the schema.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// pgForeignKeyViolation is SQLSTATE 23503.
const pgForeignKeyViolation = "23503"

// Postgres is the dispatcher's store.
type Postgres struct {
	pool    *pgxpool.Pool
	secrets SecretOpener
}

var (
	_ app.FanoutStore   = (*Postgres)(nil)
	_ app.DeliveryStore = (*Postgres)(nil)
)

// New returns a store on pool; secrets opens the subscriptions' sealed signing secrets.
func New(pool *pgxpool.Pool, secrets SecretOpener) *Postgres {
	return &Postgres{pool: pool, secrets: secrets}
}

// ActiveSubscriptionIDs returns the ids of the active subscriptions that selected
// eventType and existed when the event occurred.
func (p *Postgres) ActiveSubscriptionIDs(ctx context.Context, eventType string, occurredAt time.Time) ([]int64, error) {
	rows, err := p.pool.Query(ctx, qActiveSubscriptionIDs, eventType, occurredAt)
	if err != nil {
		return nil, fmt.Errorf("store: subscriptions of %s: %w", eventType, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("store: subscriptions of %s: %w", eventType, err)
	}
	return ids, nil
}

// InsertDelivery inserts d unless it exists; app.ErrNotFound when its subscription does not.
func (p *Postgres) InsertDelivery(ctx context.Context, d app.NewDelivery) error {
	_, err := p.pool.Exec(ctx, qInsertDelivery, d.ID, d.SubscriptionID, d.EventID, d.Event, d.Body)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == pgForeignKeyViolation {
		return app.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("store: insert delivery %s: %w", d.ID, err)
	}
	return nil
}

// Delivery returns the delivery with its subscription; app.ErrNotFound when gone.
func (p *Postgres) Delivery(ctx context.Context, id string) (app.Delivery, error) {
	var (
		d                         app.Delivery
		prevSecret                *string
		prevUntil, failingSinceAt *time.Time
	)
	err := p.pool.QueryRow(ctx, qDelivery, id).Scan(
		&d.ID, &d.SubscriptionID, &d.EventID, &d.Event, &d.Body, &d.Status, &d.Attempts, &d.RoundAttempts,
		&d.Subscription.URL, &d.Subscription.Secret, &prevSecret, &prevUntil, &d.Subscription.Active, &failingSinceAt,
	)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.Delivery{}, app.ErrNotFound
	}
	if err != nil {
		return app.Delivery{}, fmt.Errorf("store: delivery %s: %w", id, err)
	}
	d.Subscription.ID = d.SubscriptionID
	if prevSecret != nil {
		d.Subscription.PreviousSecret = *prevSecret
	}
	if prevUntil != nil {
		d.Subscription.PreviousSecretUntil = *prevUntil
	}
	if failingSinceAt != nil {
		d.Subscription.FailingSince = *failingSinceAt
	}
	if err := p.openSecrets(&d.Subscription); err != nil {
		return app.Delivery{}, err
	}
	return d, nil
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

// RecordAttempt writes the subscription's health, the delivery's new state and the
// attempt, and returns the attempt's number: one batch, which PostgreSQL runs as one
// implicit transaction (one round trip; the subscription row, updated by every attempt
// of its deliveries, stays locked only that long).
func (p *Postgres) RecordAttempt(ctx context.Context, rec app.AttemptRecord) (int, error) {
	var excerpt *string
	if rec.HasResponse {
		excerpt = &rec.Excerpt
	}
	b := &pgx.Batch{}
	// Subscription first, then delivery: the lock order of every writer of both.
	b.Queue(qSubscriptionAfterAttempt, rec.SubscriptionID, rec.Succeeded, nullString(rec.DisableReason), rec.DeliveryID)
	var attempt int
	b.Queue(qRecordAttempt, rec.DeliveryID, rec.SubscriptionID, nullInt(rec.StatusCode), nullString(rec.Error),
		rec.Status, rec.Duration.Milliseconds(), excerpt).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&attempt)
		if errors.Is(err, pgx.ErrNoRows) {
			return app.ErrNotFound
		}
		return err
	})
	err := p.pool.SendBatch(ctx, b).Close()
	if errors.Is(err, app.ErrNotFound) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("store: record attempt of %s: %w", rec.DeliveryID, err)
	}
	return attempt, nil
}

// OldestPending returns the age of the oldest pending delivery, 0 when none is.
func (p *Postgres) OldestPending(ctx context.Context) (time.Duration, error) {
	var secs float64
	if err := p.pool.QueryRow(ctx, qOldestPending).Scan(&secs); err != nil {
		return 0, fmt.Errorf("store: oldest pending delivery: %w", err)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullInt(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}
