package packages

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Update edits a draft or active package the user may manage (else 409): the fields
// of a PackagePatch, by their rules (fields.go). A new password, or none, ends every
// grant of the link at once (grants are keyed by the password hash).
func (s *Packages) Update(ctx context.Context, u app.User, client app.Client, id uuid.UUID, in PackagePatch) (app.Package, error) {
	current, err := s.visible(ctx, u, id)
	if err != nil {
		return app.Package{}, err
	}
	terms, err := s.termsCheck(ctx, current.OwnerUserID)
	if err != nil {
		return app.Package{}, err
	}
	recipients, err := in.check(s.now())
	if err != nil {
		return app.Package{}, err
	}
	if in.Recipients != nil {
		if recipients, err = withIDs(recipients, s.now().UTC().Truncate(time.Microsecond)); err != nil {
			return app.Package{}, err
		}
	}
	// The hash is computed before the row is locked: it takes tens of milliseconds.
	var hash string
	if in.Password.Set && in.Password.Value != nil {
		if hash, err = s.hasher.Hash(ctx, *in.Password.Value); err != nil {
			return app.Package{}, err
		}
	}
	return s.store.ChangePackage(ctx, id, func(p *app.Package) (app.Effects, error) {
		if err := p.Apply(app.OpEdit, s.now()); err != nil {
			return app.Effects{}, err
		}
		if err := in.apply(p, recipients); err != nil {
			return app.Effects{}, err
		}
		if in.Password.Set {
			p.PasswordHash = hash
		}
		if terms != nil {
			if err := terms(*p, in.ExpiresAt != nil); err != nil {
				return app.Effects{}, err
			}
		}
		return app.Effects{Audit: []app.AuditEntry{app.UserAudit(u, client, "package.update", id, nil)}}, nil
	})
}
