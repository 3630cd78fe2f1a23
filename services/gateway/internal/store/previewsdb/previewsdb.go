// Package previewsdb is the image previews' store on PostgreSQL (previews.Store):
// what decides whether a file gets a preview, and the preview recorded. Its SQL is
// queries.sql, compiled by sqlc.
package previewsdb

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/previews"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// Store implements previews.Store.
type Store struct {
	sql *sqldb.DB
	q   *Queries
}

var _ previews.Store = (*Store)(nil)

// NewStore returns the store on d's pool.
func NewStore(d *sqldb.DB) *Store { return &Store{sql: d, q: New(d.Pool)} }

// PreviewSource returns what decides whether a file gets a preview.
func (s *Store) PreviewSource(ctx context.Context, fileID uuid.UUID) (previews.Source, error) {
	r, err := s.q.PreviewSource(ctx, fileID)
	if err != nil {
		return previews.Source{}, sqldb.NotFound(err, "file")
	}
	return previews.Source{
		FileID: r.ID, ObjectKey: r.ObjectKey, Size: r.Size, Scan: app.ScanState(r.Scan),
		Encrypted: r.Encrypted, State: app.State(r.State), PreviewKey: r.PreviewKey,
	}, nil
}

// SetPreview records a file's preview while holding its package (FOR SHARE): an
// expiry or a deletion waits for it and then queues the preview with the object
// (the triggers of migration 00034), or came first and nothing is recorded. The lock
// also orders it with a legal hold placed or released on the package (whose UPDATE of
// packages.on_hold waits for it): held runs when the package is on hold.
func (s *Store) SetPreview(ctx context.Context, fileID uuid.UUID, key string, width, height int, held func(context.Context) error) (bool, error) {
	recorded := false
	err := s.sql.InTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		pkg, err := q.LockPackageOfFile(ctx, fileID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if st := app.State(pkg.State); st != app.StateDraft && st != app.StateActive {
			return nil
		}
		w, h := int32(width), int32(height)
		n, err := q.SetPreview(ctx, SetPreviewParams{ID: fileID, PreviewKey: &key, Width: &w, Height: &h})
		if err != nil || n != 1 {
			return err
		}
		if pkg.OnHold && held != nil {
			if err := held(ctx); err != nil {
				return err
			}
		}
		recorded = true
		return nil
	})
	return recorded, err
}
