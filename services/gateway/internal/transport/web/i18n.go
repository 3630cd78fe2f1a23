package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/pkg/i18n"
)

// catalog holds the pages' messages in every language (pkg/i18n/locales).
var catalog = i18n.MustNew()

// langCookie remembers the language a visitor picked with the switcher.
const langCookie = "shipfile_lang"

// langLink is one entry of the language switcher on every page.
type langLink struct {
	Code, Name, URL string
	Current         bool
}

// language picks the page's language: the switcher's ?lang= (then remembered in a
// cookie for a year), else the cookie, else the signed-in user's stored language (the
// account page's), else the best match of Accept-Language, else English. The cookie
// comes before the stored language so that the switcher works for a signed-in user
// too; saving a language on the account page sets the cookie to it.
func (w *Web) language(c *gin.Context) string {
	if q := c.Query("lang"); i18n.Supported(q) {
		w.setLangCookie(c, q)
		return q
	}
	if v, err := c.Cookie(langCookie); err == nil && i18n.Supported(v) {
		return v
	}
	if u, ok := currentUser(c); ok && i18n.Supported(u.Language) {
		return u.Language
	}
	return catalog.Match(c.GetHeader("Accept-Language"))
}

// setLangCookie remembers lang in this browser for a year; "" forgets it.
func (w *Web) setLangCookie(c *gin.Context, lang string) {
	age := 365 * 24 * 3600
	if lang == "" {
		age = -1
	}
	http.SetCookie(c.Writer, &http.Cookie{
		Name: langCookie, Value: lang, Path: "/", MaxAge: age,
		HttpOnly: true, Secure: w.cfg.SecureCookies, SameSite: http.SameSiteLaxMode,
	})
}

// langLinks are the switcher's links: this page, as a relative "?…" (a link's token
// is not repeated), with ?lang= set and the other query parameters kept (a flash
// message's ?msg= is dropped: it was shown once). static/app.js keeps the page's
// fragment, where an encrypted package's key travels.
func langLinks(c *gin.Context, current string) []langLink {
	q := url.Values{}
	for k, v := range c.Request.URL.Query() {
		if k != "msg" {
			q[k] = v
		}
	}
	out := make([]langLink, len(i18n.Languages))
	for i, l := range i18n.Languages {
		q.Set("lang", l.Code)
		out[i] = langLink{Code: l.Code, Name: l.Name, URL: "?" + q.Encode(), Current: l.Code == current}
	}
	return out
}

// scanMessages are the catalog ids of app.ScanText's and scanHeld's words.
var scanMessages = map[string]string{
	"being checked":                    "scan.pending",
	"checked":                          "scan.clean",
	"malware found":                    "scan.infected",
	"released":                         "scan.released",
	"could not be checked":             "scan.unjudged",
	"not checked":                      "scan.skipped",
	"malware found: removed":           "scan.held_infected",
	"being checked for malware":        "scan.held_pending",
	"could not be checked for malware": "scan.held_unjudged",
}

// scanText says a file's scan state (app.ScanText or scanHeld's words) in the
// page's language.
func scanText(l *i18n.Localizer, english string) string {
	if id, ok := scanMessages[english]; ok {
		return l.T(id)
	}
	return english
}

// jsMessages is the JSON object of the catalog's js table (the words static/app.js
// and the encrypted pages' scripts show) in l's language, for <html data-messages>:
// the scripts have no catalog of their own. Built once per language.
func jsMessages(l *i18n.Localizer) string {
	return jsMessageJSON[l.Lang]
}

var jsMessageJSON = func() map[string]string {
	out := map[string]string{}
	for _, lang := range i18n.Languages {
		l := catalog.Localizer(lang.Code)
		m := map[string]string{}
		for _, id := range catalog.IDs() {
			if k, ok := strings.CutPrefix(id, "js."); ok {
				m[k] = l.T(id)
			}
		}
		b, _ := json.Marshal(m)
		out[lang.Code] = string(b)
	}
	return out
}()

// message is a catalog message with its values, said in a page's language by the
// template function tr: what a handler hands a page that has no localizer yet.
type message struct {
	ID   string
	Args []any // name/value pairs, as i18n.Localizer.T takes them
}

// msg is a message of id with its name/value pairs.
func msg(id string, pairs ...any) message { return message{ID: id, Args: pairs} }

// size is a byte count in a message's values: tr writes it the way the page's language
// writes a limit (i18n.Localizer.SizeCompact).
type size int64

// tr says m in l's language.
func tr(l *i18n.Localizer, m message) string {
	args := make([]any, len(m.Args))
	for i, a := range m.Args {
		if s, ok := a.(size); ok {
			a = l.SizeCompact(int64(s))
		}
		args[i] = a
	}
	return l.T(m.ID, args...)
}

func init() {
	funcs["scantext"] = scanText
	funcs["strong"] = i18n.Strong
	funcs["tr"] = tr
}

// pageTexts are the catalog ids of the fixed English titles and form errors that
// handlers put in a view; render says them in the page's language.
var pageTexts = map[string]string{
	"Password required":                  "unlock.title",
	"Wrong password.":                    "unlock.wrong",
	"Link no longer available":           "gone.title",
	"Send files":                         "form.page_send",
	"Request files":                      "form.page_request",
	"This field is required.":            "form.required",
	"Sign in":                            "login.title",
	"Request sent":                       "sent.request_sent",
	"Package sent":                       "sent.package_sent",
	"Recipient added":                    "sent.recipient_added",
	"Packages":                           "layout.packages",
	"Users":                              "layout.users",
	"Webhooks":                           "layout.webhooks",
	"Account":                            "title.account",
	"Audit log":                          "title.audit",
	"Set up shipfile":                    "title.setup",
	"Policies":                           "title.policies",
	"Activity report":                    "title.activity",
	"Delete the webhook":                 "title.delete_webhook",
	"Revoke the link":                    "title.revoke_link",
	"Delete the package":                 "title.delete_package",
	"Must be a date such as 2027-01-31.": "formerr.date_example",
	"Must be a date, e.g. 2027-01-31.":   "formerr.date_eg",
	"Must be a date and time (UTC).":     "formerr.datetime",
	"Must be a package id (a UUID).":     "formerr.package_id",
	"You cannot disable your own account or take away your own admin role.": "formerr.own_account",
	"The two passwords differ.":         "formerr.passwords_differ",
	"Wrong e-mail address or password.": "formerr.wrong_login",
}

// localizeText says a handler's fixed English text in l's language: one of
// pageTexts, the unlock form's "Too many wrong passwords" or the sign-in form's "Too
// many failed sign-ins" with its minutes, or a webhook page's title.
// Other text (a package's title, an application error) is left as it is.
func localizeText(l *i18n.Localizer, s string) string {
	if id, ok := pageTexts[s]; ok {
		return l.T(id)
	}
	var n int
	if _, err := fmt.Sscanf(s, "Too many wrong passwords. Try again in %d minute(s).", &n); err == nil {
		return l.T("unlock.too_many", "Count", n)
	}
	if _, err := fmt.Sscanf(s, "Too many failed sign-ins. Try again in %d minute", &n); err == nil {
		return l.T("login.too_many", "Count", n)
	}
	if _, err := fmt.Sscanf(s, "Webhook %d", &n); err == nil && s == fmt.Sprintf("Webhook %d", n) {
		return l.T("title.webhook", "ID", n)
	}
	return s
}
