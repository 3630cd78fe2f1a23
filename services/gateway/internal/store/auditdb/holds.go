package auditdb

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// RecordAudit writes one audit entry in a transaction of its own.
func (s *Store) RecordAudit(ctx context.Context, a app.AuditEntry) error {
	return sqldb.WriteAudit(ctx, s.sql.Pool, a)
}

// CreateLegalHold stores the hold and its audit entry in one transaction and returns the
// object keys (files and previews) of the packages it covers.
func (s *Store) CreateLegalHold(ctx context.Context, h audit.Hold, a app.AuditEntry) ([]string, error) {
	var keys []string
	err := s.sql.InTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		n, err := q.InsertLegalHold(ctx, InsertLegalHoldParams{ID: h.ID, PackageID: h.PackageID, UserID: h.UserID, Reason: h.Reason, CreatedBy: h.CreatedBy, CreatedAt: h.CreatedAt})
		if err != nil {
			return err
		}
		if n == 0 {
			if h.PackageID != nil {
				return app.NotFound("package")
			}
			return app.NotFound("user")
		}
		if err := sqldb.WriteAudit(ctx, tx, a); err != nil {
			return err
		}
		keys, err = q.HoldObjectKeys(ctx, HoldObjectKeysParams{PackageID: h.PackageID, UserID: h.UserID, Held: true})
		return err
	})
	return keys, err
}

// LegalHolds returns every hold, newest first.
func (s *Store) LegalHolds(ctx context.Context) ([]audit.Hold, error) {
	rows, err := s.q.ListLegalHolds(ctx)
	if err != nil {
		return nil, err
	}
	hs := make([]audit.Hold, len(rows))
	for i, r := range rows {
		hs[i] = toHold(r)
	}
	return hs, nil
}

// ReleaseLegalHold releases the hold with its audit entry (naming the hold's package) in one
// transaction and returns the object keys no hold covers any more.
func (s *Store) ReleaseLegalHold(ctx context.Context, id uuid.UUID, by int64, at time.Time, a app.AuditEntry) (audit.Hold, []string, error) {
	var h audit.Hold
	var keys []string
	err := s.sql.InTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		cur, err := q.GetLegalHoldForUpdate(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return app.NotFound("hold")
		}
		if err != nil {
			return err
		}
		if cur.ReleasedAt != nil {
			return app.Conflict("the hold is released already")
		}
		row, err := q.ReleaseLegalHold(ctx, ReleaseLegalHoldParams{ID: id, ReleasedBy: &by, ReleasedAt: &at})
		if err != nil {
			return err
		}
		h = toHold(row)
		a.PackageID = h.PackageID
		if err := sqldb.WriteAudit(ctx, tx, a); err != nil {
			return err
		}
		keys, err = q.HoldObjectKeys(ctx, HoldObjectKeysParams{PackageID: h.PackageID, UserID: h.UserID, Held: false})
		return err
	})
	return h, keys, err
}

func toHold(r LegalHold) audit.Hold {
	return audit.Hold{ID: r.ID, PackageID: r.PackageID, UserID: r.UserID, Reason: r.Reason, CreatedBy: r.CreatedBy,
		CreatedAt: r.CreatedAt, ReleasedBy: r.ReleasedBy, ReleasedAt: r.ReleasedAt}
}
