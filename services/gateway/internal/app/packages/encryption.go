package packages

import (
	"bytes"
	"context"
	"errors"
	"strings"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// The package service's side of end-to-end encryption (docs/ENCRYPTION.md); the format
// rules are in internal/app (encryption.go).

// PutManifest stores the encrypted manifest of a draft encrypted package.
func (s *Packages) PutManifest(ctx context.Context, u app.User, client app.Client, id uuid.UUID, data []byte) error {
	if _, err := s.visible(ctx, u, id); err != nil {
		return err
	}
	if !bytes.HasPrefix(data, []byte(app.AgeMagic)) {
		return app.Invalid("the manifest must be a binary age v1 file (starting with %q)", strings.TrimSuffix(app.AgeMagic, "\n"))
	}
	return s.store.PutPackageManifest(ctx, id, data, func(p *app.Package) (app.Effects, error) {
		if !p.Encrypted() {
			return app.Effects{}, app.Conflict("this package is not end-to-end encrypted: it has no manifest")
		}
		if p.State != app.StateDraft {
			return app.Effects{}, app.Conflict("the manifest can only be set on a draft; the package is %s", p.State)
		}
		return app.Effects{Audit: []app.AuditEntry{app.UserAudit(u, client, "package.manifest", id, nil)}}, nil
	})
}

// Manifest returns the encrypted manifest of a package the user may see.
func (s *Packages) Manifest(ctx context.Context, u app.User, id uuid.UUID) ([]byte, error) {
	if _, err := s.visible(ctx, u, id); err != nil {
		return nil, err
	}
	return s.StoredManifest(ctx, id)
}

func (s *Packages) StoredManifest(ctx context.Context, id uuid.UUID) ([]byte, error) {
	b, err := s.store.GetPackageManifest(ctx, id)
	if errors.Is(err, app.ErrNotFound) {
		return nil, app.NotFound("manifest")
	}
	return b, err
}

// SetKey stores (or replaces) the user's key pair, audited and e-mailed to the user.
// Files sealed to an earlier key stay readable with that key alone.
func (s *Packages) SetKey(ctx context.Context, u app.User, client app.Client, publicKey, sealedIdentity string) (app.UserKey, error) {
	if err := app.ValidateUserKey(publicKey, sealedIdentity); err != nil {
		return app.UserKey{}, err
	}
	id := u.ID
	audit := app.AuditEntry{Actor: "user", ActorUserID: &id, Action: "key.set", IP: client.IP, UserAgent: client.UserAgent}
	return s.store.PutUserKey(ctx, app.UserKey{UserID: u.ID, PublicKey: publicKey, SealedIdentity: sealedIdentity}, audit)
}

// Key returns the user's key pair (app.NotFound: none set up).
func (s *Packages) Key(ctx context.Context, u app.User) (app.UserKey, error) {
	k, err := s.store.GetUserKey(ctx, u.ID)
	if errors.Is(err, app.ErrNotFound) {
		return app.UserKey{}, app.NotFound("encryption key")
	}
	return k, err
}

// requestKey returns the public key a new encrypted file request of owner keeps: the
// owner's key of now (app.ErrNoKey: none set up).
func (s *Packages) requestKey(ctx context.Context, owner app.User) (string, error) {
	k, err := s.store.GetUserKey(ctx, owner.ID)
	if errors.Is(err, app.ErrNotFound) {
		return "", app.ErrNoKey
	}
	return k.PublicKey, err
}
