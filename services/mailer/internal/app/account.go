package app

import (
	"bytes"
	"fmt"
	htmltemplate "html/template"
	"math"
	"strconv"
	"strings"
	texttemplate "text/template"

	"github.com/shipfile/shipfile/pkg/i18n"

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
	// L says the e-mail's words in the user's language.
	L *i18n.Localizer
}

var (
	accountText = texttemplate.Must(texttemplate.ParseFS(templateFS, "templates/account.txt.tmpl"))
	accountHTML = htmltemplate.Must(htmltemplate.New("account.html.tmpl").Funcs(mailFuncs).ParseFS(templateFS, "templates/account.html.tmpl"))
)

// renderAccount builds the e-mail of an account notice, in the user's language: what
// changed on the user's account, and what to do when it was not them. It links to the
// account page.
func renderAccount(no Notification, publicURL string) (Email, error) {
	to, err := mailbox(OneLine(no.OwnerEmail))
	if err != nil {
		return Email{}, fmt.Errorf("%w: invalid user address: %v", errUndeliverable, err)
	}
	to.Name = OneLine(no.OwnerName)
	l := catalog.Localizer(no.OwnerLanguage)
	detail := OneLine(no.AccountDetail)
	v := accountView{Name: to.Name, Link: publicURL + "/account", L: l, IfNot: l.T("mail.account.ifnot")}
	switch no.AccountEvent {
	case AccountSSOLinked:
		v.Subject = l.T("mail.account.sso_linked_subject")
		v.What = l.T("mail.account.sso_linked", "Detail", detail)
	case AccountSSOUnlinked:
		v.Subject = l.T("mail.account.sso_unlinked_subject")
		v.What = l.T("mail.account.sso_unlinked", "Detail", detail)
	case AccountRoleChanged:
		v.Subject = l.T("mail.account.role_subject")
		v.What = l.T("mail.account.role", "Detail", roleChange(l, detail))
	case AccountKeyChanged:
		v.Subject = l.T("mail.account.key_subject")
		v.What = l.T("mail.account.key", "Detail", detail)
		v.IfNot = l.T("mail.account.key_ifnot")
	case AccountQuota90:
		v.Subject = l.T("mail.account.quota_subject")
		v.What = l.T("mail.account.quota", "Detail", quotaDetail(l, detail))
		v.IfNot = l.T("mail.account.quota_ifnot")
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
		Language:   l.Lang,
	}, nil
}

// roleChange says a role change's detail ("regular -> admin") with the roles in l's
// language; a detail of another shape is left as it is.
func roleChange(l *i18n.Localizer, detail string) string {
	from, to, ok := strings.Cut(detail, " -> ")
	if !ok || l.Lang == i18n.Default {
		return detail
	}
	name := func(role string) string {
		if role != "admin" && role != "regular" {
			return role
		}
		return l.T("role." + role)
	}
	return name(from) + " → " + name(to)
}

// quotaDetail says a 90 % notice's detail ("9.1 GiB of 10 GiB", the gateway's sizes in
// English) in l's language, with its sizes written the language's way; a detail of
// another shape is left as it is.
func quotaDetail(l *i18n.Localizer, detail string) string {
	used, quota, ok := strings.Cut(detail, " of ")
	if !ok || l.Lang == i18n.Default {
		return detail
	}
	u, okU := parseSize(used)
	q, okQ := parseSize(quota)
	if !okU || !okQ {
		return detail
	}
	return l.T("mail.account.used_of", "Used", l.SizeCompact(u), "Quota", l.SizeCompact(q))
}

// parseSize reads a size as the gateway writes it ("9.1 GiB", "512 B") back into bytes.
func parseSize(s string) (int64, bool) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok || unit == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	exp := strings.Index("BKMGTPE", strings.TrimSuffix(unit, "iB")[:1])
	if exp < 0 || (exp > 0 && !strings.HasSuffix(unit, "iB")) || (exp == 0 && unit != "B") {
		return 0, false
	}
	return int64(math.Round(f * math.Pow(1024, float64(exp)))), true
}
