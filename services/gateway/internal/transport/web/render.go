package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/pkg/i18n"
	"github.com/shipfile/shipfile/pkg/qrcode"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// staticPrefix is where the stylesheet and the script are served.
const staticPrefix = "/static/ui"

// view is what every page template gets.
type view struct {
	Title   string
	User    *app.User
	CSRF    string
	Section string // the navigation entry to highlight
	Flash   string
	Error   string            // an error about the whole form
	Errors  map[string]string // field name → what is wrong with it
	Form    map[string]string // the submitted values, to fill the form again
	Static  map[string]string // asset name → URL with its content hash
	D       any               // the page's own data
	// L says the page's words in its language (Lang, for <html lang>); Langs are
	// the language switcher's links.
	L     *i18n.Localizer
	Lang  string
	Langs []langLink
	// JS is static/app.js's words in the page's language (jsMessages).
	JS string
}

// pageTemplate is one page: the layout with the page's blocks.
type pageTemplate struct {
	t *template.Template
}

// assetURLs maps each static file to a URL that changes with its content, so it can
// be cached for good.
var assetURLs = func() map[string]string {
	out := map[string]string{}
	_ = fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := staticFS.ReadFile(p)
		sum := sha256.Sum256(b)
		name := strings.TrimPrefix(p, "static/")
		out[name] = staticPrefix + "/" + name + "?v=" + hex.EncodeToString(sum[:6])
		return nil
	})
	return out
}()

var funcs = template.FuncMap{
	"sub":    func(a, b int) int { return a - b },
	"date":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
	"datep":  datePtr,
	"iso":    func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"until":  relative,
	"short":  func(s string, n int) string { return shorten(s, n) },
	"deref":  func(p *string) string { return derefString(p) },
	"derefi": func(p *int) string { return derefInt(p) },
	"has":    contains,
	"field":  fieldValue,
	"fielderr": func(v view, name string) string {
		return v.Errors[name]
	},
	"deref64": func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	},
	"list": func(s ...string) []string { return s },
	"qr":   qrSVG,
}

// qrSVG is the QR code of a link as an inline <svg>, drawn here so that the link
// never leaves the page: nothing fetches it and nothing logs it. A link too long
// for a QR code gets none.
func qrSVG(link, label string) template.HTML {
	svg, err := qrcode.SVG(link, label)
	if err != nil {
		return ""
	}
	// The SVG holds numbers and the label, which qrcode.SVG escapes.
	return template.HTML(svg) //nolint:gosec // built by qrcode.SVG from numbers and an escaped label
}

// parseTemplates parses every page with the layout.
func parseTemplates() (map[string]*pageTemplate, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*pageTemplate{}
	for _, n := range names {
		base := path.Base(n)
		if base == "layout.html" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", base, err)
		}
		out[strings.TrimSuffix(base, ".html")] = &pageTemplate{t: t}
	}
	return out, nil
}

// render writes a page. It renders into a buffer first, so a template error becomes
// an error page rather than half a page.
func (w *Web) render(c *gin.Context, status int, name string, v view) {
	p, ok := w.pages[name]
	if !ok {
		_ = c.Error(fmt.Errorf("web: no template %q", name))
		return
	}
	if u, ok := currentUser(c); ok {
		v.User = &u
	}
	// The recipient's pages have no forms: they set no cookie.
	if v.CSRF == "" && name != "recipient" && name != "gone" {
		v.CSRF = w.csrfToken(c)
	}
	v.Lang = w.language(c)
	v.L = catalog.Localizer(v.Lang)
	if v.Flash == "" {
		if id, ok := flashes[c.Query("msg")]; ok {
			v.Flash = v.L.T(id)
		}
	}
	if name == "login" && v.D == nil {
		v.D = w.loginOptions(v.Form["next"])
	}
	v.Static = assetURLs
	v.Langs = langLinks(c, v.Lang)
	v.JS = jsMessages(v.L)
	v.Title = localizeText(v.L, v.Title)
	v.Error = localizeText(v.L, v.Error)
	for k, e := range v.Errors {
		v.Errors[k] = localizeText(v.L, e)
	}
	c.Header("Content-Language", v.Lang)
	c.Header("Vary", "Accept-Language, Cookie")
	var b bytes.Buffer
	if err := p.t.Execute(&b, v); err != nil {
		_ = c.Error(fmt.Errorf("web: render %s: %w", name, err))
		return
	}
	c.Data(status, "text/html; charset=utf-8", b.Bytes())
}

// ErrorPage writes an HTML error page (httpapi calls it for every error outside the
// API), in the language the request's pages are in: its title is the status's, and a
// detail the catalog knows is translated (the rest stays as the application wrote it).
func (w *Web) ErrorPage(c *gin.Context, status int, detail string) {
	lang := w.language(c)
	l := catalog.Localizer(lang)
	// T answers a status missing from the catalogs with its id.
	id := "error.status_" + strconv.Itoa(status)
	title := l.T(id)
	if title == id {
		title = http.StatusText(status)
	}
	if status == http.StatusInternalServerError {
		detail = l.T("error.internal")
	} else {
		detail = capitalize(localizeText(l, detail))
	}
	var b bytes.Buffer
	v := view{Title: title, Static: assetURLs, D: map[string]any{"Status": status, "Detail": detail},
		L: l, Lang: lang}
	rw := c.Writer
	if err := w.pages["error"].t.Execute(&b, v); err != nil {
		w.log.Error("render error page", "err", err)
		http.Error(rw, title, status)
		return
	}
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	rw.Header().Set("Content-Language", lang)
	rw.Header().Set("Vary", "Accept-Language, Cookie")
	rw.Header().Set("Cache-Control", "no-store")
	rw.WriteHeader(status)
	_, _ = rw.Write(b.Bytes())
}

// static serves the embedded stylesheet and script. A URL with the current content
// hash (?v=) may be cached for good.
func (w *Web) static(c *gin.Context) {
	name := strings.TrimPrefix(c.Param("file"), "/")
	b, err := staticFS.ReadFile("static/" + name)
	if err != nil || strings.Contains(name, "..") {
		_ = c.Error(app.NotFound("file"))
		return
	}
	if u, ok := assetURLs[name]; ok && c.Query("v") != "" && strings.HasSuffix(u, "?v="+c.Query("v")) {
		c.Header("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		c.Header("Cache-Control", "no-cache")
	}
	ct := "application/octet-stream"
	switch path.Ext(name) {
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".svg":
		ct = "image/svg+xml"
	}
	c.Data(http.StatusOK, ct, b)
}

// flashes are the messages a redirect may ask the next page to show (?msg=…), as
// catalog ids (pkg/i18n/locales, table flash): a fixed set, so a link cannot put words
// on the page.
var flashes = map[string]string{
	"admin-created":     "flash.admin-created",
	"signed-out":        "flash.signed-out",
	"deleted":           "flash.deleted",
	"revoked":           "flash.revoked",
	"recipient-revoked": "flash.recipient-revoked",
	"file-removed":      "flash.file-removed",
	"file-released":     "flash.file-released",
	"saved":             "flash.saved",
	"token-revoked":     "flash.token-revoked",
	"sso-linked":        "flash.sso-linked",
	"sso-unlinked":      "flash.sso-unlinked",
	"user-created":      "flash.user-created",
	"user-saved":        "flash.user-saved",
	"webhook-saved":     "flash.webhook-saved",
	"webhook-deleted":   "flash.webhook-deleted",
	"test-queued":       "flash.test-queued",
	"redelivered":       "flash.redelivered",
	"language-saved":    "flash.language-saved",
}

// formErrors turns an application error about a form into messages beside its
// fields. The application's messages start with the name of the field they are about
// ("title must be…"), and the forms use the same names. Errors of other kinds are not
// form errors: ok is false.
func formErrors(err error, fields ...string) (map[string]string, string, bool) {
	var ae *app.Error
	if !errors.As(err, &ae) || (ae.Kind != app.KindInvalid && ae.Kind != app.KindConflict) {
		return nil, "", false
	}
	d := ae.Detail
	for _, f := range fields {
		if rest, ok := strings.CutPrefix(d, f+" "); ok {
			return map[string]string{f: fieldMessage(rest)}, "", true
		}
		if rest, ok := strings.CutPrefix(d, f+": "); ok {
			return map[string]string{f: capitalize(rest)}, "", true
		}
	}
	for _, f := range fields {
		if strings.Contains(d, " "+f+" ") {
			return map[string]string{f: capitalize(d)}, "", true
		}
	}
	return nil, capitalize(d), true
}

func fieldMessage(rest string) string {
	if rest == "is required" {
		return "This field is required."
	}
	return capitalize(rest)
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	s = string(unicode.ToUpper(r)) + s[n:]
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "?") {
		s += "."
	}
	return s
}

func datePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// relative says how far t is from now: "in 3 days", "2 hours ago".
func relative(t time.Time) string {
	d := time.Until(t)
	past := d < 0
	if past {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = "less than a minute"
	case d < time.Hour:
		s = plural(int(d/time.Minute), "minute")
	case d < 48*time.Hour:
		s = plural(int(d/time.Hour), "hour")
	default:
		s = plural(int(d/(24*time.Hour)), "day")
	}
	if past {
		return s + " ago"
	}
	return "in " + s
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func derefInt(p *int) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprint(*p)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func fieldValue(v view, name string) string { return v.Form[name] }
