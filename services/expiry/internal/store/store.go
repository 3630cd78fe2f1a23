// Package store is the expiry service's persistence: packages, files, the object
// deletion queue, the audit log and the outbox in PostgreSQL (pgx/v5; the gateway owns
// the schema), and the objects in the S3 bucket (minio-go).
package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/outbox"
	"github.com/shipfile/shipfile/services/expiry/internal/app"
)

// Postgres is the expiry service's database store.
type Postgres struct {
	pool *pgxpool.Pool
	// wake is called after a transaction that wrote outbox rows has committed.
	wake func()
}

var _ app.Store = (*Postgres)(nil)

// Option configures a Postgres store.
type Option func(*Postgres)

// WithOutboxWake has the store call wake (the outbox relay's Wake) after every
// transaction that wrote outbox rows has committed, so they are published at once
// instead of at the relay's next poll. Nothing in the transaction itself signals.
func WithOutboxWake(wake func()) Option { return func(s *Postgres) { s.wake = wake } }

// New returns a store on pool.
func New(pool *pgxpool.Pool, opts ...Option) *Postgres {
	s := &Postgres{pool: pool}
	for _, o := range opts {
		o(s)
	}
	if s.wake == nil {
		s.wake = func() {}
	}
	return s
}

// ExpireDue expires up to limit packages overdue at now in one transaction: the state
// change, their objects queued for deletion, and the effects (outbox rows, audit entries).
func (s *Postgres) ExpireDue(ctx context.Context, now time.Time, limit int, effects func([]app.Package) (app.Effects, error)) ([]app.Package, error) {
	var out []app.Package
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, qExpireDue, limit, now)
		if err != nil {
			return fmt.Errorf("store: expire: %w", err)
		}
		ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (app.Package, error) {
			var p app.Package
			err := r.Scan(&p.ID, &p.Title, &p.RecipientEmail, &p.OwnerUserID, &p.Direction, &p.PreviousState, &p.ExpiresAt)
			return p, err
		})
		if err != nil {
			return fmt.Errorf("store: expire: %w", err)
		}
		if len(ps) == 0 {
			return nil
		}

		ids := make([]string, len(ps))
		index := make(map[string]int, len(ps))
		for i, p := range ps {
			ids[i] = p.ID
			index[p.ID] = i
		}
		rows, err = tx.Query(ctx, qQueueFileObjects, ids)
		if err != nil {
			return fmt.Errorf("store: queue objects: %w", err)
		}
		var pkg, key string
		if _, err := pgx.ForEachRow(rows, []any{&pkg, &key}, func() error {
			i := index[pkg]
			ps[i].ObjectKeys = append(ps[i].ObjectKeys, key)
			return nil
		}); err != nil {
			return fmt.Errorf("store: queue objects: %w", err)
		}

		fx, err := effects(ps)
		if err != nil {
			return err
		}
		if err := writeEffects(ctx, tx, fx); err != nil {
			return err
		}
		out = ps
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) > 0 {
		s.wake() // committed: package.expired events to publish
	}
	return out, nil
}

// writeEffects writes audit entries, and events as outbox rows, in tx.
func writeEffects(ctx context.Context, tx pgx.Tx, fx app.Effects) error {
	if len(fx.Audit) > 0 {
		actions := make([]string, len(fx.Audit))
		pkgs := make([]string, len(fx.Audit))
		for i, a := range fx.Audit {
			actions[i], pkgs[i] = a.Action, a.PackageID
		}
		if _, err := tx.Exec(ctx, qInsertAudit, actions, pkgs); err != nil {
			return fmt.Errorf("store: audit: %w", err)
		}
	}
	msgs := make([]outbox.Message, 0, len(fx.Events))
	for _, e := range fx.Events {
		m, err := events.EventMessage(e)
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	return outbox.Insert(ctx, tx, msgs...)
}

// SweepDeletions locks a batch of queued object keys, lets remove delete their objects
// while the keys stay locked (so two sweeps never work on one key), and forgets the
// keys that are gone.
func (s *Postgres) SweepDeletions(ctx context.Context, limit int, remove func(keys []string) ([]string, error)) (int, int, error) {
	var locked, forgotten int
	var removeErr error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, qLockDeletions, limit)
		if err != nil {
			return fmt.Errorf("store: lock deletions: %w", err)
		}
		keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("store: lock deletions: %w", err)
		}
		locked = len(keys)
		if locked == 0 {
			return nil
		}
		var removed []string
		removed, removeErr = remove(keys)
		if len(removed) == 0 {
			return nil
		}
		tag, err := tx.Exec(ctx, qForgetDeletions, removed)
		if err != nil {
			return fmt.Errorf("store: forget deletions: %w", err)
		}
		forgotten = int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return locked, 0, err
	}
	if removeErr != nil {
		return locked, forgotten, fmt.Errorf("store: remove objects: %w", removeErr)
	}
	return locked, forgotten, nil
}

// SweepOrphans locks up to limit reservations older than grace, forgets those whose
// file row exists, lets remove delete the objects of the others while their keys stay
// locked (so no gateway commits a file row of a key being removed, and no two sweeps
// work on one key), and forgets the keys that are gone.
func (s *Postgres) SweepOrphans(ctx context.Context, grace time.Duration, limit int, remove func(keys []string) ([]string, error)) (int, int, error) {
	var locked, removedN int
	var removeErr error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, qLockOrphans, grace.Seconds(), limit)
		if err != nil {
			return fmt.Errorf("store: lock orphans: %w", err)
		}
		var (
			key       string
			committed bool
			forget    []string
			orphans   []string
		)
		if _, err := pgx.ForEachRow(rows, []any{&key, &committed}, func() error {
			locked++
			if committed {
				forget = append(forget, key)
			} else {
				orphans = append(orphans, key)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("store: lock orphans: %w", err)
		}
		if len(orphans) > 0 {
			var removed []string
			removed, removeErr = remove(orphans)
			removedN = len(removed)
			forget = append(forget, removed...)
		}
		if len(forget) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, qForgetReservations, forget); err != nil {
			return fmt.Errorf("store: forget reservations: %w", err)
		}
		return nil
	})
	if err != nil {
		return locked, 0, err
	}
	if removeErr != nil {
		return locked, removedN, fmt.Errorf("store: remove orphan objects: %w", removeErr)
	}
	return locked, removedN, nil
}

// OverdueLag returns the age at now of the oldest package overdue at now that is not
// expired yet.
func (s *Postgres) OverdueLag(ctx context.Context, now time.Time) (time.Duration, error) {
	var secs *float64
	if err := s.pool.QueryRow(ctx, qOverdueLag, now).Scan(&secs); err != nil {
		return 0, fmt.Errorf("store: overdue lag: %w", err)
	}
	if secs == nil || *secs < 0 {
		return 0, nil
	}
	return time.Duration(*secs * float64(time.Second)), nil
}

// PendingDeletions counts the object keys queued for deletion.
func (s *Postgres) PendingDeletions(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, qPendingDeletions).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: pending deletions: %w", err)
	}
	return n, nil
}
