package packages

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/i18n"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/policies"
)

// ResolveRecipients applies the rules of docs/API.md, "Several recipients", to the
// recipient fields of a create (or an
// edit that sets the list): list nil means recipient_email (required then),
// recipient_name and lang name the one recipient; a list holds 1–50 entries with valid,
// case-insensitively unique addresses, and recipient_email / recipient_name, when
// given beside it, must name its first entry. The recipients it returns have no id.
func ResolveRecipients(list *[]app.RecipientInput, email, name, lang *string) ([]app.Recipient, error) {
	if list == nil {
		if email == nil {
			return nil, app.Invalid("recipient_email (or recipients) is required")
		}
		e, err := app.NormalizeEmail(*email)
		if err != nil {
			return nil, app.Invalid("recipient_email must be a valid e-mail address")
		}
		r := app.Recipient{Email: e}
		if name != nil {
			if err := app.ValidateRecipientName(*name); err != nil {
				return nil, err
			}
			r.Name = *name
		}
		if r.Language, err = recipientLanguage(lang, "recipient_language"); err != nil {
			return nil, err
		}
		return []app.Recipient{r}, nil
	}
	if n := len(*list); n < app.MinRecipients || n > app.MaxRecipients {
		return nil, app.Invalid("recipients must list %d to %d recipients", app.MinRecipients, app.MaxRecipients)
	}
	out := make([]app.Recipient, 0, len(*list))
	seen := make(map[string]bool, len(*list))
	for i, in := range *list {
		if in.Email == nil {
			return nil, app.Invalid("recipients[%d].email is required", i)
		}
		e, err := app.NormalizeEmail(*in.Email)
		if err != nil {
			return nil, app.Invalid("recipients[%d].email must be a valid e-mail address", i)
		}
		key := strings.ToLower(e)
		if seen[key] {
			return nil, app.Invalid("recipients[%d].email appears twice: each recipient once", i)
		}
		seen[key] = true
		r := app.Recipient{Email: e}
		if in.Name != nil {
			if err := app.ValidateRecipientName(*in.Name); err != nil {
				return nil, app.Invalid("recipients[%d].name must be at most %d characters without control characters or bidi overrides", i, app.MaxRecipientLen)
			}
			r.Name = *in.Name
		}
		if r.Language, err = recipientLanguage(in.Language, fmt.Sprintf("recipients[%d].language", i)); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if email != nil && !strings.EqualFold(strings.TrimSpace(*email), out[0].Email) {
		return nil, app.Invalid("recipient_email must be the first entry of recipients")
	}
	if name != nil && *name != out[0].Name {
		return nil, app.Invalid("recipient_name must be the name of the first entry of recipients")
	}
	return out, nil
}

// recipientLanguage checks a recipient's language: one of pkg/i18n's Languages (""
// is none of them), or English when nil.
func recipientLanguage(lang *string, field string) (string, error) {
	if lang == nil {
		return i18n.Default, nil
	}
	if !i18n.Supported(*lang) {
		codes := make([]string, len(i18n.Languages))
		for i, l := range i18n.Languages {
			codes[i] = l.Code
		}
		return "", app.Invalid("%s must be one of %s", field, strings.Join(codes, ", "))
	}
	return *lang, nil
}

// withIDs gives each recipient a fresh id.
func withIDs(rs []app.Recipient, now time.Time) ([]app.Recipient, error) {
	for i := range rs {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		rs[i].ID, rs[i].LinkState, rs[i].CreatedAt = id, app.LinkNone, now
	}
	return rs, nil
}

// AddRecipient adds a recipient to an active package the user may manage, mints their
// link and e-mails it at once. It returns the package, the recipient and the link,
// which is never available again.
func (s *Packages) AddRecipient(ctx context.Context, u app.User, client app.Client, id uuid.UUID, in app.NewRecipient) (app.Package, app.Recipient, string, error) {
	current, err := s.visible(ctx, u, id)
	if err != nil {
		return app.Package{}, app.Recipient{}, "", err
	}
	rs, err := ResolveRecipients(&[]app.RecipientInput{in}, nil, nil, nil)
	if err != nil {
		return app.Package{}, app.Recipient{}, "", err
	}
	owner, err := s.store.GetUser(ctx, current.OwnerUserID)
	if err != nil {
		return app.Package{}, app.Recipient{}, "", err
	}
	if pol, ok, err := s.policyOf(ctx, current.OwnerUserID); err != nil {
		return app.Package{}, app.Recipient{}, "", err
	} else if ok {
		if err := policies.CheckRecipient(pol, rs[0].Email); err != nil {
			return app.Package{}, app.Recipient{}, "", err
		}
	}
	token, hash, err := newLinkToken()
	if err != nil {
		return app.Package{}, app.Recipient{}, "", err
	}
	link := s.publicURL + "/p/" + token
	now := s.now().UTC().Truncate(time.Microsecond)
	rs, err = withIDs(rs, now)
	if err != nil {
		return app.Package{}, app.Recipient{}, "", err
	}
	r := rs[0]
	r.LinkHash, r.LinkState = hash, app.LinkActive
	p, err := s.store.ChangePackage(ctx, id, func(p *app.Package) (app.Effects, error) {
		if p.State != app.StateActive {
			return app.Effects{}, app.Conflict("recipients are added to an active package; this one is %s", p.State)
		}
		if len(p.Recipients) >= app.MaxRecipients {
			return app.Effects{}, app.Conflict("package already has the maximum of %d recipients", app.MaxRecipients)
		}
		for _, o := range p.Recipients {
			if strings.EqualFold(o.Email, r.Email) {
				return app.Effects{}, app.Conflict("%s is already a recipient of this package", r.Email)
			}
		}
		p.SetRecipients(append(p.Recipients, r))
		audit := app.UserAudit(u, client, "recipient.add", id, nil)
		audit.RecipientID = &r.ID
		return app.Effects{
			Mail:  []*eventsv1.MailJob{mailJob(*p, r, owner, link)},
			Audit: []app.AuditEntry{audit},
		}, nil
	})
	if err != nil {
		return app.Package{}, app.Recipient{}, "", err
	}
	return p, r, link, nil
}

// RevokeRecipient ends one recipient's link of an active package at once; the other
// links keep working. It fires package.revoked with that recipient's address and
// all_links false.
func (s *Packages) RevokeRecipient(ctx context.Context, u app.User, client app.Client, id, recipientID uuid.UUID) (app.Package, error) {
	if _, err := s.visible(ctx, u, id); err != nil {
		return app.Package{}, err
	}
	return s.store.ChangePackage(ctx, id, func(p *app.Package) (app.Effects, error) {
		i := -1
		for j, r := range p.Recipients {
			if r.ID == recipientID {
				i = j
			}
		}
		if i < 0 {
			return app.Effects{}, app.NotFound("recipient")
		}
		if p.State != app.StateActive {
			return app.Effects{}, app.Conflict("only an active package's links can be revoked; this one is %s", p.State)
		}
		r := &p.Recipients[i]
		if r.LinkState != app.LinkActive {
			return app.Effects{}, app.Conflict("this recipient's link is %s", r.LinkState)
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		r.LinkState, r.RevokedAt = app.LinkRevoked, &now
		audit := app.UserAudit(u, client, "recipient.revoke", id, nil)
		audit.RecipientID = &r.ID
		return app.Effects{
			Events: []*eventsv1.Envelope{recipientRevoked(*p, *r, u.ID)},
			Audit:  []app.AuditEntry{audit},
		}, nil
	})
}
