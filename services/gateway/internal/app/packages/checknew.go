package packages

import "github.com/shipfile/shipfile/services/gateway/internal/app"

// CheckNew runs the checks of Create that need nothing but in, each field on its own,
// and returns every field's error (one a field, in the form's order; none when in is
// valid as far as in alone tells). Create stops at the first; a form shows them all.
func CheckNew(in NewPackage) []error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if in.RecipientEmail == nil && in.Recipients == nil {
		add(app.Invalid("recipient_email is required"))
	} else {
		_, err := ResolveRecipients(in.Recipients, in.RecipientEmail, in.RecipientName, in.RecipientLanguage)
		add(err)
	}
	if in.Title == nil {
		add(app.Invalid("title is required"))
	} else {
		add(app.ValidateTitle(*in.Title))
	}
	if in.Direction != nil && *in.Direction != string(app.Outbound) && *in.Direction != string(app.Inbound) {
		add(app.Invalid("direction must be outbound or inbound"))
	}
	if in.TTLDays != nil && (*in.TTLDays < app.MinTTLDays || *in.TTLDays > app.MaxTTLDays) {
		add(app.Invalid("ttl_days must be between %d and %d", app.MinTTLDays, app.MaxTTLDays))
	}
	if in.Note != nil {
		add(app.ValidateNote(*in.Note))
	}
	add(ValidateMaxDownloads(in.MaxDownloads))
	if in.Encryption != nil {
		_, err := app.ValidateEncryption(*in.Encryption)
		add(err)
	}
	if in.Password != nil {
		add(ValidateLinkPassword(*in.Password))
	}
	return errs
}
