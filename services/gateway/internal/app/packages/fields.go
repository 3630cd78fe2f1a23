package packages

import (
	"strings"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// The fields of a package that its owner sets: what Create takes (NewPackage) and
// Update takes (PackagePatch), each field's rule for both, and the fields the package
// page's edit form holds as texts (EditTexts). A field of the owner's is declared,
// checked and assigned here; Create and Update add what needs the service (the
// recipients' ids, the owner's key, the password's hash, the owner's policy).

// NewPackage is the input of Create. Nil fields take their defaults.
type NewPackage struct {
	Title          *string
	RecipientEmail *string
	RecipientName  *string
	// RecipientLanguage is the one recipient's language (with RecipientEmail alone).
	RecipientLanguage *string
	Recipients        *[]app.RecipientInput // nil: the one recipient of RecipientEmail
	Direction         *string
	TTLDays           *int
	Note              *string
	Password          *string // the link's password; nil: none
	MaxDownloads      *int    // nil: no limit
	NotifyOwner       *bool   // default true
	Encryption        *string // none (default) or age
}

// newFields are the rules of a new package's fields that need nothing but the input,
// in the order Create applies them: each checks its field of in and sets it on p, a
// draft with the defaults. The recipients it sets have no ids yet; the password is
// checked by Create after the owner's key.
var newFields = []func(in NewPackage, p *app.Package) error{
	func(in NewPackage, p *app.Package) error {
		if in.Title == nil {
			return app.Invalid("title is required")
		}
		p.Title = *in.Title
		return app.ValidateTitle(p.Title)
	},
	func(in NewPackage, p *app.Package) error {
		if in.RecipientEmail == nil && in.Recipients == nil {
			return app.Invalid("recipient_email is required")
		}
		rs, err := ResolveRecipients(in.Recipients, in.RecipientEmail, in.RecipientName, in.RecipientLanguage)
		p.SetRecipients(rs)
		return err
	},
	func(in NewPackage, p *app.Package) error {
		if in.Direction == nil {
			return nil
		}
		p.Direction = app.Direction(*in.Direction)
		if p.Direction != app.Outbound && p.Direction != app.Inbound {
			return app.Invalid("direction must be outbound or inbound")
		}
		return nil
	},
	func(in NewPackage, p *app.Package) error {
		if in.TTLDays == nil {
			return nil
		}
		p.TTLDays = *in.TTLDays
		if p.TTLDays < app.MinTTLDays || p.TTLDays > app.MaxTTLDays {
			return app.Invalid("ttl_days must be between %d and %d", app.MinTTLDays, app.MaxTTLDays)
		}
		return nil
	},
	func(in NewPackage, p *app.Package) error {
		if in.Note == nil {
			return nil
		}
		p.Note = *in.Note
		return app.ValidateNote(p.Note)
	},
	func(in NewPackage, p *app.Package) error {
		p.MaxDownloads = in.MaxDownloads
		return ValidateMaxDownloads(in.MaxDownloads)
	},
	func(in NewPackage, p *app.Package) error {
		p.NotifyOwner = in.NotifyOwner == nil || *in.NotifyOwner
		return nil
	},
	func(in NewPackage, p *app.Package) error {
		if in.Encryption == nil {
			return nil
		}
		var err error
		p.Encryption, err = app.ValidateEncryption(*in.Encryption)
		return err
	},
}

// fill applies newFields to p: it stops at the first error, or with all goes on and
// returns every field's.
func (in NewPackage) fill(p *app.Package, all bool) []error {
	var errs []error
	for _, field := range newFields {
		if err := field(in, p); err != nil {
			errs = append(errs, err)
			if !all {
				break
			}
		}
	}
	return errs
}

// newDraft is the package Create starts from: a draft of owner with every default.
func newDraft(owner int64) app.Package {
	return app.Package{
		OwnerUserID: owner,
		Direction:   app.Outbound,
		State:       app.StateDraft,
		TTLDays:     app.DefaultTTLDays,
		Encryption:  app.EncryptionNone,
	}
}

// CheckNew runs the checks of Create that need nothing but in, each field on its own,
// and returns every field's error (one a field, none when in is valid as far as in
// alone tells). Create stops at the first; a form shows them all.
func CheckNew(in NewPackage) []error {
	p := newDraft(0)
	errs := in.fill(&p, true)
	if in.Password != nil {
		if err := ValidateLinkPassword(*in.Password); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// PackagePatch is the input of Update: nil (or unset) fields stay as they are.
type PackagePatch struct {
	Title         *string
	Note          *string
	RecipientName *string
	// RecipientEmail, beside Recipients, must be its first entry's address (else
	// 422); alone it is not an edit.
	RecipientEmail *string
	// Recipients replaces a draft's recipient list (an active package's grows one by
	// one: AddRecipient).
	Recipients   *[]app.RecipientInput
	ExpiresAt    *time.Time
	Password     app.Nullable[string] // null removes the password
	MaxDownloads app.Nullable[int]    // null removes the limit
	NotifyOwner  *bool
}

// check applies the rules of the patch's fields (the same as Create's, an expiry's
// own), in the order Update applies them, before the package's row is locked. It
// returns the recipients of a new list, without ids.
func (in PackagePatch) check(now time.Time) ([]app.Recipient, error) {
	if in.Title != nil {
		if err := app.ValidateTitle(*in.Title); err != nil {
			return nil, err
		}
	}
	if in.RecipientName != nil {
		if err := app.ValidateRecipientName(*in.RecipientName); err != nil {
			return nil, err
		}
	}
	var recipients []app.Recipient
	if in.Recipients != nil {
		var err error
		if recipients, err = ResolveRecipients(in.Recipients, in.RecipientEmail, in.RecipientName, nil); err != nil {
			return nil, err
		}
	}
	if in.Note != nil {
		if err := app.ValidateNote(*in.Note); err != nil {
			return nil, err
		}
	}
	if in.ExpiresAt != nil {
		if err := ValidateExpiry(*in.ExpiresAt, now); err != nil {
			return nil, err
		}
	}
	if in.MaxDownloads.Set {
		if err := ValidateMaxDownloads(in.MaxDownloads.Value); err != nil {
			return nil, err
		}
	}
	if in.Password.Set && in.Password.Value != nil {
		if err := ValidateLinkPassword(*in.Password.Value); err != nil {
			return nil, err
		}
	}
	return recipients, nil
}

// apply sets the patch's fields on p, under the package's lock and after check:
// recipients is check's list with ids. The password's hash is Update's.
func (in PackagePatch) apply(p *app.Package, recipients []app.Recipient) error {
	if in.Title != nil {
		p.Title = *in.Title
	}
	if in.Note != nil {
		p.Note = *in.Note
	}
	if in.Recipients != nil {
		if p.State != app.StateDraft {
			return app.Conflict("the recipients of an active package are added one at a time (POST /api/v1/packages/{id}/recipients) and revoked one at a time")
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
	if in.MaxDownloads.Set {
		p.MaxDownloads = in.MaxDownloads.Value
	}
	if in.NotifyOwner != nil {
		p.NotifyOwner = *in.NotifyOwner
	}
	return nil
}

// TextField is a field of a package that the package page's edit form holds as a
// text: its name (the API's), its text for a package, and how a text from the form
// sets it on a patch.
type TextField struct {
	Name string
	Text func(p app.Package) string
	Set  func(in *PackagePatch, text string)
}

// EditTexts are the fields the package page's edit form holds as texts, in the order
// its errors are matched to them. The form's other fields (the expiry, the password,
// the download limit, the notifications) are read by the web UI.
var EditTexts = []TextField{
	{Name: "title", Text: func(p app.Package) string { return p.Title }, Set: func(in *PackagePatch, s string) { in.Title = &s }},
	{Name: "note", Text: func(p app.Package) string { return p.Note }, Set: func(in *PackagePatch, s string) { in.Note = &s }},
	{Name: "recipient_name", Text: func(p app.Package) string { return p.RecipientName }, Set: func(in *PackagePatch, s string) { in.RecipientName = &s }},
}
