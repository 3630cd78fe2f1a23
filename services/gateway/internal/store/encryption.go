package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

var _ app.EncryptionStore = (*Postgres)(nil)

// PutPackageManifest stores (or replaces) a package's encrypted manifest in the
// package's transaction, once check accepts the package.
func (s *Postgres) PutPackageManifest(ctx context.Context, id uuid.UUID, data []byte, check func(p *app.Package) (app.Effects, error)) error {
	return s.withLocked(ctx, id, func(q *Queries, p *app.Package) (app.Effects, error) {
		fx, err := check(p)
		if err != nil {
			return fx, err
		}
		return fx, q.PutPackageManifest(ctx, PutPackageManifestParams{PackageID: id, Data: data})
	})
}

// GetPackageManifest returns a package's encrypted manifest.
func (s *Postgres) GetPackageManifest(ctx context.Context, id uuid.UUID) ([]byte, error) {
	b, err := s.q.GetPackageManifest(ctx, id)
	return b, sqldb.NotFound(err, "manifest")
}

// PutUserKey stores (or replaces) a user's key pair and, in the same transaction,
// writes audit (its detail names the key set, and the key it replaced) and the
// user's "your encryption key was changed" notice.
func (s *Postgres) PutUserKey(ctx context.Context, k app.UserKey, audit app.AuditEntry) (app.UserKey, error) {
	var out app.UserKey
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		old, err := q.GetUserKey(ctx, k.UserID)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			audit.Detail = fmt.Sprintf("user %d: key set to %s", k.UserID, k.PublicKey)
		case err != nil:
			return err
		default:
			audit.Detail = fmt.Sprintf("user %d: key %s replaced by %s", k.UserID, old.PublicKey, k.PublicKey)
		}
		row, err := q.PutUserKey(ctx, PutUserKeyParams{UserID: k.UserID, PublicKey: k.PublicKey, SealedIdentity: k.SealedIdentity})
		if err != nil {
			return err
		}
		out = toUserKey(row)
		if err := sqldb.WriteAudit(ctx, tx, audit); err != nil {
			return err
		}
		return q.InsertAccountNotice(ctx, InsertAccountNoticeParams{UserID: k.UserID, Event: identity.NoticeKeyChanged, Detail: k.PublicKey})
	})
	return out, err
}

// GetUserKey returns a user's key pair.
func (s *Postgres) GetUserKey(ctx context.Context, userID int64) (app.UserKey, error) {
	row, err := s.q.GetUserKey(ctx, userID)
	if err != nil {
		return app.UserKey{}, sqldb.NotFound(err, "encryption key")
	}
	return toUserKey(row), nil
}

func toUserKey(r UserKey) app.UserKey {
	return app.UserKey{UserID: r.UserID, PublicKey: r.PublicKey, SealedIdentity: r.SealedIdentity, CreatedAt: r.CreatedAt}
}
