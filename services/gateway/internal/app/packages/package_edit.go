package packages

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Update edits a draft or active package the user may manage (else 409): title, note,
// recipient name, expiry, password, download limit and notifications. A new password,
// or none, ends every grant of the link at once (grants are keyed by the password
// hash).
func (s *Packages) Update(ctx context.Context, u User, client Client, id uuid.UUID, in PackagePatch) (Package, error) {
	if _, err := s.visible(ctx, u, id); err != nil {
		return Package{}, err
	}
	// The same rules as Create's.
	if in.Title != nil {
		if err := ValidateTitle(*in.Title); err != nil {
			return Package{}, err
		}
	}
	if in.RecipientName != nil {
		if err := ValidateRecipientName(*in.RecipientName); err != nil {
			return Package{}, err
		}
	}
	var recipients []Recipient
	if in.Recipients != nil {
		var err error
		if recipients, err = ResolveRecipients(in.Recipients, nil, in.RecipientName); err != nil {
			return Package{}, err
		}
		if recipients, err = withIDs(recipients, s.now().UTC().Truncate(time.Microsecond)); err != nil {
			return Package{}, err
		}
	}
	if in.Note != nil {
		if err := ValidateNote(*in.Note); err != nil {
			return Package{}, err
		}
	}
	if in.ExpiresAt != nil {
		if err := ValidateExpiry(*in.ExpiresAt, s.now()); err != nil {
			return Package{}, err
		}
	}
	if in.MaxDownloads.Set {
		if err := ValidateMaxDownloads(in.MaxDownloads.Value); err != nil {
			return Package{}, err
		}
	}
	// The hash is computed before the row is locked: it takes tens of milliseconds.
	var hash string
	if in.Password.Set && in.Password.Value != nil {
		if err := ValidateLinkPassword(*in.Password.Value); err != nil {
			return Package{}, err
		}
		var err error
		if hash, err = s.hasher.Hash(ctx, *in.Password.Value); err != nil {
			return Package{}, err
		}
	}
	return s.store.ChangePackage(ctx, id, func(p *Package) (Effects, error) {
		if err := p.Apply(OpEdit, s.now()); err != nil {
			return Effects{}, err
		}
		if in.Title != nil {
			p.Title = *in.Title
		}
		if in.Note != nil {
			p.Note = *in.Note
		}
		if in.Recipients != nil {
			if p.State != StateDraft {
				return Effects{}, Conflict("the recipients of an active package are added one at a time (POST /api/v1/packages/{id}/recipients) and revoked one at a time")
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
		return Effects{Audit: []AuditEntry{userAudit(u, client, "package.update", id, nil)}}, nil
	})
}
