// Package store is the scanner's persistence: files, the audit log, owner notifications
// and the outbox in PostgreSQL (pgx/v5; the gateway owns the schema), and the objects in
// the S3 bucket (minio-go).
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/outbox"
	"github.com/shipfile/shipfile/services/scanner/internal/app"
	"github.com/shipfile/shipfile/services/scanner/internal/store/db"
)

// Postgres is the scanner's database store.
type Postgres struct {
	pool *pgxpool.Pool
	q    *db.Queries
	// wake is called after a transaction that wrote outbox rows has committed.
	wake func()
}

var _ app.Store = (*Postgres)(nil)

// New returns a store on pool; wake (the outbox relay's Wake, or nil) is called after
// each commit that wrote an event.
func New(pool *pgxpool.Pool, wake func()) *Postgres {
	if wake == nil {
		wake = func() {}
	}
	return &Postgres{pool: pool, q: db.New(pool), wake: wake}
}

// File returns the file with its package head.
func (s *Postgres) File(ctx context.Context, fileID string) (app.File, error) {
	r, err := s.q.GetFile(ctx, fileID)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.File{}, app.ErrNotFound
	}
	if err != nil {
		return app.File{}, fmt.Errorf("store: file: %w", err)
	}
	head, err := events.PackageHeadFromRow(r.Head)
	if err != nil {
		return app.File{}, fmt.Errorf("store: file: %w", err)
	}
	return app.File{
		ID: r.ID, PackageID: r.PackageID, Filename: r.Filename, Size: r.Size, ObjectKey: r.ObjectKey,
		Scan: r.Scan, Attempts: int(r.ScanAttempts), Package: head,
	}, nil
}

// Record writes v and its effects in one transaction, if the file is still pending.
func (s *Postgres) Record(ctx context.Context, f app.File, v app.Verdict, fx app.Effects) (bool, error) {
	recorded := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		_, err := q.RecordVerdict(ctx, db.RecordVerdictParams{FileID: v.FileID, Scan: v.Scan, Signature: v.Signature})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // a verdict already, or the file is gone
		}
		if err != nil {
			return fmt.Errorf("store: verdict: %w", err)
		}
		recorded = true
		if fx.AuditAction != "" {
			fileID := f.ID
			if err := q.InsertAudit(ctx, db.InsertAuditParams{Action: fx.AuditAction, PackageID: &f.PackageID, FileID: &fileID, Detail: fx.AuditDetail}); err != nil {
				return fmt.Errorf("store: audit: %w", err)
			}
		}
		if fx.NotifyOwner {
			fileID := f.ID
			if err := q.InsertInfectedNotification(ctx, db.InsertInfectedNotificationParams{
				PackageID: f.PackageID, FileID: &fileID, Filename: f.Filename, Signature: v.Signature,
			}); err != nil {
				return fmt.Errorf("store: owner notification: %w", err)
			}
		}
		if fx.Event != nil {
			m, err := events.EventMessage(fx.Event)
			if err != nil {
				return err
			}
			if err := outbox.Insert(ctx, tx, m); err != nil {
				return fmt.Errorf("store: outbox: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if recorded && fx.Event != nil {
		s.wake()
	}
	return recorded, nil
}

// CountFailure counts a failed attempt of a pending file.
func (s *Postgres) CountFailure(ctx context.Context, fileID string) (int, error) {
	n, err := s.q.CountFailure(ctx, fileID)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: count failure: %w", err)
	}
	return int(n), nil
}
