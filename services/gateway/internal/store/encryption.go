package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
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

// PutUserKey stores (or replaces) a user's key pair, with its audit entry and the
// user's e-mail (putUserKey).
func (s *Postgres) PutUserKey(ctx context.Context, k app.UserKey, audit app.AuditEntry) (app.UserKey, error) {
	return s.putUserKey(ctx, k, audit)
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
