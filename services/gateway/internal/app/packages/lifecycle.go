package packages

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Create validates and stores a draft package, with its package.created event.
func (s *Packages) Create(ctx context.Context, owner app.User, client app.Client, in NewPackage) (app.Package, error) {
	p := newDraft(owner.ID)
	if errs := in.fill(&p, false); len(errs) > 0 {
		return app.Package{}, errs[0]
	}
	var err error
	if p.Encrypted() && p.Direction == app.Inbound {
		if p.OwnerPublicKey, err = s.requestKey(ctx, owner); err != nil {
			return app.Package{}, err
		}
	}
	if in.Password != nil {
		if err := ValidateLinkPassword(*in.Password); err != nil {
			return app.Package{}, err
		}
		if p.PasswordHash, err = s.hasher.Hash(ctx, *in.Password); err != nil {
			return app.Package{}, err
		}
	}
	p.ID, err = uuid.NewV7()
	if err != nil {
		return app.Package{}, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	p.CreatedAt = now
	p.ExpiresAt = now.Add(time.Duration(p.TTLDays) * 24 * time.Hour)
	recipients, err := withIDs(p.Recipients, now)
	if err != nil {
		return app.Package{}, err
	}
	p.SetRecipients(recipients)
	unlock, err := s.checkNew(ctx, p)
	if err != nil {
		return app.Package{}, err
	}
	defer unlock()
	fx := app.Effects{
		Events: []*eventsv1.Envelope{packageCreated(p)},
		Audit:  []app.AuditEntry{app.UserAudit(owner, client, "package.create", p.ID, nil)},
	}
	if err := s.store.CreatePackage(ctx, p, fx); err != nil {
		return app.Package{}, err
	}
	return p, nil
}

// Finalize seals a draft, mints one magic link per recipient and queues each their
// e-mail. It returns the package and the links (the first recipient's first), which
// are never available again.
func (s *Packages) Finalize(ctx context.Context, u app.User, client app.Client, id uuid.UUID) (app.Package, []app.LinkMint, error) {
	current, err := s.visible(ctx, u, id)
	if err != nil {
		return app.Package{}, nil, err
	}
	// The owner is read before the package's transaction: a read through the store
	// inside it would need a second pool connection while holding the first, and
	// enough concurrent finalizes would then wait on each other for good.
	owner, err := s.store.GetUser(ctx, current.OwnerUserID)
	if err != nil {
		return app.Package{}, nil, err
	}
	// Tokens for as many recipients as the package may have by the time its row is
	// locked (a draft's recipients may change until then).
	type minted struct {
		token string
		hash  []byte
	}
	var tokens []minted
	mint := func(n int) error {
		for len(tokens) < n {
			token, hash, err := newLinkToken()
			if err != nil {
				return err
			}
			tokens = append(tokens, minted{token, hash})
		}
		return nil
	}
	if err := mint(max(len(current.Recipients), 1)); err != nil {
		return app.Package{}, nil, err
	}
	terms, err := s.termsCheck(ctx, current.OwnerUserID)
	if err != nil {
		return app.Package{}, nil, err
	}
	var links []app.LinkMint
	p, err := s.store.ChangePackage(ctx, id, func(p *app.Package) (app.Effects, error) {
		if err := p.Apply(app.OpFinalize, s.now()); err != nil {
			return app.Effects{}, err
		}
		if terms != nil {
			if err := terms(*p, false); err != nil {
				return app.Effects{}, err
			}
		}
		if p.Direction == app.Outbound && p.FileCount == 0 {
			return app.Effects{}, app.Conflict("package has no files")
		}
		if err := mint(len(p.Recipients)); err != nil {
			return app.Effects{}, err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		p.FinalizedAt = &now
		p.ExpiresAt = now.Add(time.Duration(p.TTLDays) * 24 * time.Hour)
		fx := app.Effects{
			Events: []*eventsv1.Envelope{packageFinalized(*p)},
			Audit:  []app.AuditEntry{app.UserAudit(u, client, "package.finalize", id, nil)},
		}
		links = links[:0]
		for i := range p.Recipients {
			r := &p.Recipients[i]
			r.LinkHash, r.LinkState = tokens[i].hash, app.LinkActive
			link := s.publicURL + "/p/" + tokens[i].token
			links = append(links, app.LinkMint{RecipientID: r.ID, Email: r.Email, MagicLink: link})
			fx.Mail = append(fx.Mail, mailJob(*p, *r, owner, link))
		}
		return fx, nil
	})
	if err != nil {
		return app.Package{}, nil, err
	}
	return p, links, nil
}

// Revoke kills the active link of a package at once.
func (s *Packages) Revoke(ctx context.Context, u app.User, client app.Client, id uuid.UUID) (app.Package, error) {
	if _, err := s.visible(ctx, u, id); err != nil {
		return app.Package{}, err
	}
	p, err := s.store.ChangePackage(ctx, id, func(p *app.Package) (app.Effects, error) {
		if err := p.Apply(app.OpRevoke, s.now()); err != nil {
			return app.Effects{}, err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		p.RevokedAt = &now
		for i := range p.Recipients {
			if r := &p.Recipients[i]; r.LinkState == app.LinkActive {
				r.LinkState, r.RevokedAt = app.LinkRevoked, &now
			}
		}
		return app.Effects{
			Events: []*eventsv1.Envelope{packageRevoked(*p, u.ID)},
			Audit:  []app.AuditEntry{app.UserAudit(u, client, "package.revoke", id, nil)},
		}, nil
	})
	if err == nil && s.endUploads != nil {
		s.endUploads(ctx, id)
	}
	return p, err
}

// Delete removes a package, its files and their objects for good.
func (s *Packages) Delete(ctx context.Context, u app.User, client app.Client, id uuid.UUID) error {
	if _, err := s.visible(ctx, u, id); err != nil {
		return err
	}
	keys, err := s.store.DeletePackage(ctx, id, func(p *app.Package) (app.Effects, error) {
		return app.Effects{
			Events: []*eventsv1.Envelope{packageDeleted(*p, u.ID)},
			Audit:  []app.AuditEntry{app.UserAudit(u, client, "package.delete", id, nil)},
		}, nil
	})
	if err != nil {
		return err
	}
	s.removeObjects(ctx, keys)
	if s.endUploads != nil {
		s.endUploads(ctx, id)
	}
	return nil
}

// removeObjects deletes objects whose rows are gone. Their keys were queued in the
// same transaction, so one that fails here stays queued for a later sweep.
func (s *Packages) removeObjects(ctx context.Context, keys []string) {
	ctx = context.WithoutCancel(ctx)
	var done []string
	for _, k := range keys {
		if err := s.objects.Remove(ctx, k); err == nil {
			done = append(done, k)
		}
	}
	if len(done) > 0 {
		_ = s.store.ObjectsDeleted(ctx, done)
	}
}

// SweepDeletedObjects removes objects still queued for deletion, after a failure
// between a row's deletion and its object's.
func (s *Packages) SweepDeletedObjects(ctx context.Context, keys []string) {
	s.removeObjects(ctx, keys)
}

func newLinkToken() (token string, hash []byte, err error) {
	b := make([]byte, linkTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	token = base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(token))
	return token, sum[:], nil
}

// linkTokenBytes is the size of a magic link's random token.
const linkTokenBytes = 32
