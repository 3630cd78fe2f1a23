// Package webhookadmindb is the webhook administration's store on PostgreSQL
// (webhookadmin.Store): subscriptions, their secrets, redelivery and the attempt log.
// Its SQL is queries.sql, compiled by sqlc.
package webhookadmindb

import (
	"context"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/webhookadmin"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// Store implements webhookadmin.Store.
type Store struct {
	sql *sqldb.DB
	q   *Queries
}

var _ webhookadmin.Store = (*Store)(nil)

// NewStore returns the store on d's pool.
func NewStore(d *sqldb.DB) *Store { return &Store{sql: d, q: New(d.Pool)} }

// CreateWebhook inserts a subscription and returns it with its id. Its ordering is
// set in the same transaction, so no dispatcher sees it without.
func (s *Store) CreateWebhook(ctx context.Context, w webhookadmin.Webhook) (webhookadmin.Webhook, error) {
	var out webhookadmin.Webhook
	err := pgx.BeginFunc(ctx, s.sql.Pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		row, err := q.InsertWebhook(ctx, InsertWebhookParams{
			Url: w.URL, Description: w.Description, Events: toEventsRow(w), Secret: w.Secret, Active: w.Active,
			MaxInFlight: int32(w.MaxInFlight), RateLimit: toInt32Ptr(w.RateLimit), CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
		})
		if err == nil && w.Ordering != row.Ordering {
			row, err = q.SetWebhookOrdering(ctx, SetWebhookOrderingParams{ID: row.ID, Ordering: w.Ordering})
		}
		out = toWebhook(row)
		return err
	})
	if err != nil {
		return webhookadmin.Webhook{}, err
	}
	return out, nil
}

// ListWebhooks returns every subscription, oldest first.
func (s *Store) ListWebhooks(ctx context.Context) ([]webhookadmin.Webhook, error) {
	rows, err := s.q.ListWebhooks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]webhookadmin.Webhook, len(rows))
	for i, r := range rows {
		out[i] = toWebhook(r)
	}
	return out, nil
}

// GetWebhook returns a subscription by id.
func (s *Store) GetWebhook(ctx context.Context, id int64) (webhookadmin.Webhook, error) {
	row, err := s.q.GetWebhook(ctx, id)
	if err != nil {
		return webhookadmin.Webhook{}, sqldb.NotFound(err, "webhook")
	}
	return toWebhook(row), nil
}

// ChangeWebhook locks the subscription's row, lets change mutate it, saves it and
// writes the effects, in one transaction. The lock keeps the dispatcher's own updates
// (failures, disabling) from being lost.
func (s *Store) ChangeWebhook(ctx context.Context, id int64, change func(w *webhookadmin.Webhook) (app.Effects, error)) (webhookadmin.Webhook, error) {
	var out webhookadmin.Webhook
	err := s.sql.InTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		row, err := q.LockWebhook(ctx, id)
		if err != nil {
			return sqldb.NotFound(err, "webhook")
		}
		w := toWebhook(row)
		fx, err := change(&w)
		if err != nil {
			return err
		}
		saved, err := q.SaveWebhook(ctx, SaveWebhookParams{
			ID: w.ID, Url: w.URL, Description: w.Description, Events: toEventsRow(w), Secret: w.Secret,
			PreviousSecret: w.PreviousSecret, PreviousSecretUntil: w.PreviousSecretUntil, Active: w.Active,
			DisabledReason: w.DisabledReason, DisabledAt: w.DisabledAt, FailingSince: w.FailingSince,
			FailuresCountedFrom: w.FailuresCountedFrom, MaxInFlight: int32(w.MaxInFlight), RateLimit: toInt32Ptr(w.RateLimit),
			UpdatedAt: w.UpdatedAt,
		})
		if err != nil {
			return err
		}
		if w.Ordering != saved.Ordering {
			if saved, err = q.SetWebhookOrdering(ctx, SetWebhookOrderingParams{ID: w.ID, Ordering: w.Ordering}); err != nil {
				return err
			}
		}
		out = toWebhook(saved)
		return s.sql.WriteEffects(ctx, tx, fx)
	})
	return out, err
}

// DeleteWebhook deletes a subscription with its deliveries and their attempts, in one
// transaction (no foreign key does it: it would lock the subscription's row on every
// delivery). The dispatchers sweep deliveries a fan-out wrote meanwhile.
func (s *Store) DeleteWebhook(ctx context.Context, id int64) error {
	return pgx.BeginFunc(ctx, s.sql.Pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		n, err := q.DeleteWebhook(ctx, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return app.NotFound("webhook")
		}
		_, err = q.DeleteWebhookDeliveries(ctx, id)
		return err
	})
}

// WriteWebhookEffects writes effects that concern the subscription, which must exist.
func (s *Store) WriteWebhookEffects(ctx context.Context, id int64, fx app.Effects) error {
	return s.sql.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := s.q.WithTx(tx).HoldWebhook(ctx, id); err != nil {
			return sqldb.NotFound(err, "webhook")
		}
		return s.sql.WriteEffects(ctx, tx, fx)
	})
}

// RedeliverWebhook resets a delivery of the subscription to pending with a fresh
// round of attempts and writes the effects, in one transaction.
func (s *Store) RedeliverWebhook(ctx context.Context, id int64, deliveryID uuid.UUID, fx app.Effects) error {
	return s.sql.InTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if _, err := q.HoldWebhook(ctx, id); err != nil {
			return sqldb.NotFound(err, "webhook")
		}
		n, err := q.RedeliverWebhookDelivery(ctx, RedeliverWebhookDeliveryParams{ID: deliveryID, SubscriptionID: id})
		if err != nil {
			return err
		}
		if n == 0 {
			return app.NotFound("delivery")
		}
		return s.sql.WriteEffects(ctx, tx, fx)
	})
}

// ListWebhookAttempts returns a page of the subscription's attempts, newest first.
func (s *Store) ListWebhookAttempts(ctx context.Context, f webhookadmin.WebhookAttemptFilter) ([]webhookadmin.WebhookAttempt, error) {
	rows, err := s.q.ListWebhookAttempts(ctx, ListWebhookAttemptsParams{
		SubscriptionID: f.WebhookID, BeforeID: f.BeforeID, MaxRows: int32(f.Limit),
	})
	if err != nil {
		return nil, err
	}
	out := make([]webhookadmin.WebhookAttempt, len(rows))
	for i, r := range rows {
		out[i] = webhookadmin.WebhookAttempt{
			ID: r.ID, DeliveryID: r.DeliveryID, EventID: r.EventID, Event: r.Event, Attempt: int(r.Attempt),
			StatusCode: intPtr(r.StatusCode), Error: r.Error, DurationMS: int(r.DurationMs),
			ResponseExcerpt: r.ResponseExcerpt, CreatedAt: r.CreatedAt, DeliveryStatus: webhookadmin.DeliveryStatus(r.DeliveryStatus),
		}
	}
	return out, nil
}

func toWebhook(r WebhookSubscription) webhookadmin.Webhook {
	w := webhookadmin.Webhook{
		ID: r.ID, URL: r.Url, Description: r.Description, Events: r.Events, Secret: r.Secret,
		PreviousSecret: r.PreviousSecret, PreviousSecretUntil: r.PreviousSecretUntil, Active: r.Active,
		DisabledReason: r.DisabledReason, DisabledAt: r.DisabledAt, FailingSince: r.FailingSince,
		FailuresCountedFrom: r.FailuresCountedFrom, LastSuccessAt: r.LastSuccessAt,
		MaxInFlight: int(r.MaxInFlight), Ordering: r.Ordering, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.Events == nil {
		// NULL: every event type, listed expanded.
		w.Events, w.AllEvents = slices.Clone(events.Types), true
	}
	if r.RateLimit != nil {
		n := int(*r.RateLimit)
		w.RateLimit = &n
	}
	return w
}

// toEventsRow is the events column of w: NULL for every event type.
func toEventsRow(w webhookadmin.Webhook) []string {
	if w.AllEvents {
		return nil
	}
	return w.Events
}

func toInt32Ptr(v *int) *int32 {
	if v == nil {
		return nil
	}
	n := int32(*v)
	return &n
}

func intPtr(v *int32) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}
