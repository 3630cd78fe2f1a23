package packages

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Update edits a draft or active package the user may manage (else 409): title, note,
// recipient name, expiry, password, download limit and notifications. A new password,
// or none, ends every grant of the link at once (grants are keyed by the password
// hash).
func (s *Packages) Update(ctx context.Context, u app.User, client app.Client, id uuid.UUID, in app.PackagePatch) (app.Package, error) {
	current, err := s.visible(ctx, u, id)
	if err != nil {
		return app.Package{}, err
	}
	terms, err := s.termsCheck(ctx, current.OwnerUserID)
	if err != nil {
		return app.Package{}, err
	}
	// The same rules as Create's.
	if in.Title != nil {
		if err := app.ValidateTitle(*in.Title); err != nil {
			return app.Package{}, err
		}
	}
	if in.RecipientName != nil {
		if err := app.ValidateRecipientName(*in.RecipientName); err != nil {
			return app.Package{}, err
		}
	}
	var recipients []app.Recipient
	if in.Recipients != nil {
		var err error
		if recipients, err = ResolveRecipients(in.Recipients, in.RecipientEmail, in.RecipientName, nil); err != nil {
			return app.Package{}, err
		}
		if recipients, err = withIDs(recipients, s.now().UTC().Truncate(time.Microsecond)); err != nil {
			return app.Package{}, err
		}
	}
	if in.Note != nil {
		if err := app.ValidateNote(*in.Note); err != nil {
			return app.Package{}, err
		}
	}
	if in.ExpiresAt != nil {
		if err := ValidateExpiry(*in.ExpiresAt, s.now()); err != nil {
			return app.Package{}, err
		}
	}
	if in.MaxDownloads.Set {
		if err := ValidateMaxDownloads(in.MaxDownloads.Value); err != nil {
			return app.Package{}, err
		}
	}
	// The hash is computed before the row is locked: it takes tens of milliseconds.
	var hash string
	if in.Password.Set && in.Password.Value != nil {
		if err := ValidateLinkPassword(*in.Password.Value); err != nil {
			return app.Package{}, err
		}
		var err error
		if hash, err = s.hasher.Hash(ctx, *in.Password.Value); err != nil {
			return app.Package{}, err
		}
	}
	return s.store.ChangePackage(ctx, id, func(p *app.Package) (app.Effects, error) {
		if err := p.Apply(app.OpEdit, s.now()); err != nil {
			return app.Effects{}, err
		}
		if in.Title != nil {
			p.Title = *in.Title
		}
		if in.Note != nil {
			p.Note = *in.Note
		}
		if in.Recipients != nil {
			if p.State != app.StateDraft {
				return app.Effects{}, app.Conflict("the recipients of an active package are added one at a time (POST /api/v1/packages/{id}/recipients) and revoked one at a time")
			}
			// A recipient already on the list keeps their id.
			for i := range recipients {
				for _, old := range p.Recipients {
					if strings.EqualFold(old.Email, recipients[i].Email) {
						recipients[i].ID, recipients[i].CreatedAt = old.ID, old.CreatedAt
					}
				}
			}
			p.SetRecipients(recipients)
		} else if in.RecipientName != nil {
			p.RecipientName = *in.RecipientName
			if len(p.Recipients) > 0 {
				p.Recipients[0].Name = *in.RecipientName
			}
		}
		if in.ExpiresAt != nil {
			p.ExpiresAt = in.ExpiresAt.UTC().Truncate(time.Microsecond)
		}
		if in.Password.Set {
			p.PasswordHash = hash
		}
		if in.MaxDownloads.Set {
			p.MaxDownloads = in.MaxDownloads.Value
		}
		if in.NotifyOwner != nil {
			p.NotifyOwner = *in.NotifyOwner
		}
		if terms != nil {
			if err := terms(*p, in.ExpiresAt != nil); err != nil {
				return app.Effects{}, err
			}
		}
		return app.Effects{Audit: []app.AuditEntry{app.UserAudit(u, client, "package.update", id, nil)}}, nil
	})
}
