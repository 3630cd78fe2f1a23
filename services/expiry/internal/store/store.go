// Package store is the expiry service's persistence: packages, files, the object
// deletion queue, the audit log and the outbox in PostgreSQL (pgx/v5; the gateway owns
// the schema), and the objects in the S3 bucket (minio-go).
package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/outbox"
	"github.com/shipfile/shipfile/services/expiry/internal/app"
	"github.com/shipfile/shipfile/services/expiry/internal/store/db"
)

// Postgres is the expiry service's database store.
type Postgres struct {
	pool *pgxpool.Pool
	q    *db.Queries // the statements of queries.sql, on the pool
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
	s := &Postgres{pool: pool, q: db.New(pool)}
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
		q := s.q.WithTx(tx)
		rows, err := q.ExpireDue(ctx, db.ExpireDueParams{Now: now, MaxRows: int32(min(limit, math.MaxInt32))})
		if err != nil {
			return fmt.Errorf("store: expire: %w", err)
		}
		if len(rows) == 0 {
			return nil
		}
		ps := make([]app.Package, len(rows))
		for i, r := range rows {
			head, err := events.PackageHeadFromRow(r.Head)
			if err != nil {
				return fmt.Errorf("store: expire: %w", err)
			}
			ps[i] = app.Package{PackageHead: head, PreviousState: r.PreviousState, ExpiresAt: r.ExpiresAt}
		}
		// Oldest deadline first: UPDATE … RETURNING promises no order, whatever the
		// ORDER BY of the CTE that picked the rows.
		slices.SortStableFunc(ps, func(a, b app.Package) int {
			return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), strings.Compare(a.ID, b.ID))
		})

		ids := make([]string, len(ps))
		index := make(map[string]int, len(ps))
		for i, p := range ps {
			ids[i] = p.ID
			index[p.ID] = i
		}
		keys, err := q.QueueFileObjects(ctx, ids)
		if err != nil {
			return fmt.Errorf("store: queue objects: %w", err)
		}
		for _, k := range keys {
			i := index[k.PackageID]
			ps[i].ObjectKeys = append(ps[i].ObjectKeys, k.ObjectKey)
		}

		fx, err := effects(ps)
		if err != nil {
			return err
		}
		if err := writeEffects(ctx, tx, q, fx); err != nil {
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
func writeEffects(ctx context.Context, tx pgx.Tx, q *db.Queries, fx app.Effects) error {
	if len(fx.Audit) > 0 {
		actions := make([]string, len(fx.Audit))
		pkgs := make([]string, len(fx.Audit))
		for i, a := range fx.Audit {
			actions[i], pkgs[i] = a.Action, a.PackageID
		}
		if err := q.InsertAudit(ctx, db.InsertAuditParams{Actions: actions, PackageIds: pkgs}); err != nil {
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
		q := s.q.WithTx(tx)
		keys, err := q.LockDeletions(ctx, int32(min(limit, math.MaxInt32)))
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
		n, err := q.ForgetDeletions(ctx, removed)
		if err != nil {
			return fmt.Errorf("store: forget deletions: %w", err)
		}
		forgotten = int(n)
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
		q := s.q.WithTx(tx)
		rows, err := q.LockOrphans(ctx, db.LockOrphansParams{GraceSecs: grace.Seconds(), MaxRows: int32(min(limit, math.MaxInt32))})
		if err != nil {
			return fmt.Errorf("store: lock orphans: %w", err)
		}
		var forget, orphans []string
		for _, r := range rows {
			locked++
			if r.Committed {
				forget = append(forget, r.ObjectKey)
			} else {
				orphans = append(orphans, r.ObjectKey)
			}
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
		if err := q.ForgetReservations(ctx, forget); err != nil {
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

// RemoveOldAudit removes up to limit audit entries older than retention (by the
// database's clock) from the front of the audit chain, up to the first younger or
// legally held one, keeps the last one's hash as the chain's anchor, and returns how
// many it removed.
func (s *Postgres) RemoveOldAudit(ctx context.Context, retention time.Duration, limit int) (int, error) {
	n, err := s.q.RemoveOldAudit(ctx, db.RemoveOldAuditParams{RetentionSecs: retention.Seconds(), MaxRows: int32(min(limit, math.MaxInt32))})
	if err != nil {
		return 0, fmt.Errorf("store: remove old audit entries: %w", err)
	}
	return int(n), nil
}

// CheckpointAudit claims the next audit checkpoint when every has passed since the last
// one and writes its event (built by checkpoint) to the outbox in the claim's
// transaction; another instance's claim, or one too recent, writes nothing.
func (s *Postgres) CheckpointAudit(ctx context.Context, every time.Duration, checkpoint func(app.Checkpoint) *eventsv1.Envelope) (bool, error) {
	wrote := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		row, err := s.q.WithTx(tx).ClaimAuditCheckpoint(ctx, every.Seconds())
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		m, err := events.EventMessage(checkpoint(app.Checkpoint{At: row.At, HeadSeq: row.HeadSeq, HeadHash: row.HeadHash,
			AnchorSeq: row.AnchorSeq, AnchorHash: row.AnchorHash}))
		if err != nil {
			return err
		}
		wrote = true
		return outbox.Insert(ctx, tx, m)
	})
	if err != nil {
		return false, fmt.Errorf("store: audit checkpoint: %w", err)
	}
	if wrote {
		s.wake()
	}
	return wrote, nil
}

// OverdueLag returns the age at now of the oldest package overdue at now that is not
// expired yet.
func (s *Postgres) OverdueLag(ctx context.Context, now time.Time) (time.Duration, error) {
	secs, err := s.q.OverdueLag(ctx, now)
	if err != nil {
		return 0, fmt.Errorf("store: overdue lag: %w", err)
	}
	if secs < 0 {
		return 0, nil
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// PendingDeletions counts the object keys queued for deletion.
func (s *Postgres) PendingDeletions(ctx context.Context) (int64, error) {
	n, err := s.q.PendingDeletions(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: pending deletions: %w", err)
	}
	return n, nil
}
