package app

import (
	"bytes"
	"fmt"
	htmltemplate "html/template"
	texttemplate "text/template"

	"github.com/shipfile/shipfile/pkg/msgerr"
)

// NotifyAccount is the kind of an account notice: a security e-mail to a user about
// their own account (gateway table account_notices). It is sent whatever the user's
// notification settings say.
const NotifyAccount = "account"

// Events of account notices (account_notices.event).
const (
	AccountSSOLinked   = "sso_linked"   // an identity of the OpenID provider linked; Detail: the provider
	AccountSSOUnlinked = "sso_unlinked" // the identity unlinked; Detail: the provider
	AccountRoleChanged = "role_changed" // Detail: "regular -> admin"
	AccountKeyChanged  = "key_changed"  // the encryption key set or replaced; Detail: the new public key
	AccountQuota90     = "quota_90"     // the user's packages hold 90 % of their storage quota; Detail: "9 GiB of 10 GiB"
)

// accountView is what the account notice templates see. Every field is one line.
type accountView struct {
	Subject string
	Name    string
	// What happened, in a sentence, and what to do if it was not the user.
	What, IfNot string
	Link        string
}

var (
	accountText = texttemplate.Must(texttemplate.ParseFS(templateFS, "templates/account.txt.tmpl"))
	accountHTML = htmltemplate.Must(htmltemplate.ParseFS(templateFS, "templates/account.html.tmpl"))
)

// renderAccount builds the e-mail of an account notice: what changed on the user's
// account, and what to do when it was not them. It links to the account page.
func renderAccount(no Notification, publicURL string) (Email, error) {
	to, err := mailbox(OneLine(no.OwnerEmail))
	if err != nil {
		return Email{}, fmt.Errorf("%w: invalid user address: %v", errUndeliverable, err)
	}
	to.Name = OneLine(no.OwnerName)
	detail := OneLine(no.AccountDetail)
	v := accountView{Name: to.Name, Link: publicURL + "/account",
		IfNot: "If this was not you, tell your administrator at once."}
	switch no.AccountEvent {
	case AccountSSOLinked:
		v.Subject = "An SSO sign-in was linked to your shipfile account"
		v.What = fmt.Sprintf("Your shipfile account was linked to an account at the identity provider %s: it can now sign in to shipfile.", detail)
	case AccountSSOUnlinked:
		v.Subject = "The SSO sign-in of your shipfile account was unlinked"
		v.What = fmt.Sprintf("Your shipfile account is no longer linked to the identity provider %s: sign in with your password.", detail)
	case AccountRoleChanged:
		v.Subject = "Your shipfile role changed"
		v.What = fmt.Sprintf("Your role in shipfile changed: %s.", detail)
	case AccountKeyChanged:
		v.Subject = "Your encryption key was changed"
		v.What = fmt.Sprintf("The encryption key of your file requests was set or replaced: new requests are encrypted to %s.", detail)
		v.IfNot = "If this was not you, someone with access to your account may read files sent to your new requests: replace the key on your account page, revoke your API tokens and tell your administrator."
	case AccountQuota90:
		v.Subject = "Your shipfile storage is 90 % full"
		v.What = fmt.Sprintf("Your packages hold %s of your storage quota: uploads that do not fit are refused.", detail)
		v.IfNot = "Delete packages you no longer need, or ask your administrator for a larger quota."
	default:
		return Email{}, msgerr.Poison(fmt.Errorf("unknown account notice %q", no.AccountEvent))
	}
	var text, html bytes.Buffer
	if err := accountText.Execute(&text, v); err != nil {
		return Email{}, fmt.Errorf("render account notice text: %w", err)
	}
	if err := accountHTML.Execute(&html, v); err != nil {
		return Email{}, fmt.Errorf("render account notice html: %w", err)
	}
	return Email{
		JobID:      fmt.Sprintf("account-%d", no.ID),
		To:         to,
		SenderName: "shipfile",
		Subject:    v.Subject,
		Text:       text.String(),
		HTML:       html.String(),
	}, nil
}
