package packages

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// ResolveRecipients applies SPEC's rules to the recipient fields of a create (or an
// edit that sets the list): list nil means recipient_email (required then) and
// recipient_name name the one recipient; a list holds 1–50 entries with valid,
// case-insensitively unique addresses, and recipient_email / recipient_name, when
// given beside it, must name its first entry. The recipients it returns have no id.
func ResolveRecipients(list *[]RecipientInput, email, name *string) ([]Recipient, error) {
	if list == nil {
		if email == nil {
			return nil, Invalid("recipient_email (or recipients) is required")
		}
		e, err := NormalizeEmail(*email)
		if err != nil {
			return nil, Invalid("recipient_email must be a valid e-mail address")
		}
		r := Recipient{Email: e}
		if name != nil {
			if err := ValidateRecipientName(*name); err != nil {
				return nil, err
			}
			r.Name = *name
		}
		return []Recipient{r}, nil
	}
	if n := len(*list); n < MinRecipients || n > MaxRecipients {
		return nil, Invalid("recipients must list %d to %d recipients", MinRecipients, MaxRecipients)
	}
	out := make([]Recipient, 0, len(*list))
	seen := make(map[string]bool, len(*list))
	for i, in := range *list {
		if in.Email == nil {
			return nil, Invalid("recipients[%d].email is required", i)
		}
		e, err := NormalizeEmail(*in.Email)
		if err != nil {
			return nil, Invalid("recipients[%d].email must be a valid e-mail address", i)
		}
		key := strings.ToLower(e)
		if seen[key] {
			return nil, Invalid("recipients[%d].email appears twice: each recipient once", i)
		}
		seen[key] = true
		r := Recipient{Email: e}
		if in.Name != nil {
			if err := ValidateRecipientName(*in.Name); err != nil {
				return nil, Invalid("recipients[%d].name must be at most %d characters without control characters or bidi overrides", i, MaxRecipientLen)
			}
			r.Name = *in.Name
		}
		out = append(out, r)
	}
	if email != nil && !strings.EqualFold(strings.TrimSpace(*email), out[0].Email) {
		return nil, Invalid("recipient_email must be the first entry of recipients")
	}
	if name != nil && *name != out[0].Name {
		return nil, Invalid("recipient_name must be the name of the first entry of recipients")
	}
	return out, nil
}

// withIDs gives each recipient a fresh id.
func withIDs(rs []Recipient, now time.Time) ([]Recipient, error) {
	for i := range rs {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		rs[i].ID, rs[i].LinkState, rs[i].CreatedAt = id, LinkNone, now
	}
	return rs, nil
}

// AddRecipient adds a recipient to an active package the user may manage, mints their
// link and e-mails it at once. It returns the package, the recipient and the link,
// which is never available again.
func (s *Packages) AddRecipient(ctx context.Context, u User, client Client, id uuid.UUID, in NewRecipient) (Package, Recipient, string, error) {
	current, err := s.visible(ctx, u, id)
	if err != nil {
		return Package{}, Recipient{}, "", err
	}
	rs, err := ResolveRecipients(&[]RecipientInput{in}, nil, nil)
	if err != nil {
		return Package{}, Recipient{}, "", err
	}
	owner, err := s.store.GetUser(ctx, current.OwnerUserID)
	if err != nil {
		return Package{}, Recipient{}, "", err
	}
	token, hash, err := newLinkToken()
	if err != nil {
		return Package{}, Recipient{}, "", err
	}
	link := s.publicURL + "/p/" + token
	now := s.now().UTC().Truncate(time.Microsecond)
	rs, err = withIDs(rs, now)
	if err != nil {
		return Package{}, Recipient{}, "", err
	}
	r := rs[0]
	r.LinkHash, r.LinkState = hash, LinkActive
	p, err := s.store.ChangePackage(ctx, id, func(p *Package) (Effects, error) {
		if p.State != StateActive {
			return Effects{}, Conflict("recipients are added to an active package; this one is %s", p.State)
		}
		if len(p.Recipients) >= MaxRecipients {
			return Effects{}, Conflict("package already has the maximum of %d recipients", MaxRecipients)
		}
		for _, o := range p.Recipients {
			if strings.EqualFold(o.Email, r.Email) {
				return Effects{}, Conflict("%s is already a recipient of this package", r.Email)
			}
		}
		p.SetRecipients(append(p.Recipients, r))
		audit := userAudit(u, client, "recipient.add", id, nil)
		audit.RecipientID = &r.ID
		return Effects{
			Mail:  []*eventsv1.MailJob{mailJob(*p, r, owner, link)},
			Audit: []AuditEntry{audit},
		}, nil
	})
	if err != nil {
		return Package{}, Recipient{}, "", err
	}
	return p, r, link, nil
}

// RevokeRecipient ends one recipient's link of an active package at once; the other
// links keep working. It fires package.revoked with that recipient's address and
// all_links false.
func (s *Packages) RevokeRecipient(ctx context.Context, u User, client Client, id, recipientID uuid.UUID) (Package, error) {
	if _, err := s.visible(ctx, u, id); err != nil {
		return Package{}, err
	}
	return s.store.ChangePackage(ctx, id, func(p *Package) (Effects, error) {
		i := -1
		for j, r := range p.Recipients {
			if r.ID == recipientID {
				i = j
			}
		}
		if i < 0 {
			return Effects{}, NotFound("recipient")
		}
		if p.State != StateActive {
			return Effects{}, Conflict("only an active package's links can be revoked; this one is %s", p.State)
		}
		r := &p.Recipients[i]
		if r.LinkState != LinkActive {
			return Effects{}, Conflict("this recipient's link is %s", r.LinkState)
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		r.LinkState, r.RevokedAt = LinkRevoked, &now
		audit := userAudit(u, client, "recipient.revoke", id, nil)
		audit.RecipientID = &r.ID
		return Effects{
			Events: []*eventsv1.Envelope{recipientRevoked(*p, *r, u.ID)},
			Audit:  []AuditEntry{audit},
		}, nil
	})
}
