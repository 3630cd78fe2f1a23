// Package i18n holds shipfile's message catalogs (locales/<lang>.toml, one file a
// language, read by github.com/nicksnyder/go-i18n/v2) and what turns them into text for
// one language: a Localizer translates a message (with its plural form), and formats
// sizes and dates the way that language writes them.
//
// English is the default: a language that is not supported falls back to it, and so
// does a message missing from a catalog (which TestCatalogsComplete forbids).
package i18n

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"path"
	"sort"
	"strings"

	goi18n "github.com/nicksnyder/go-i18n/v2/i18n"
	"github.com/pelletier/go-toml/v2"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed locales/*.toml
var localeFS embed.FS

// Default is the language used when nothing asks for another.
const Default = "en"

// Language is a supported language: its code (a BCP 47 base tag) and its name in
// itself, as a language switcher shows it.
type Language struct {
	Code string
	Name string
}

// Languages are the supported languages, in the order a switcher lists them.
var Languages = []Language{
	{"en", "English"},
	{"de", "Deutsch"},
	{"fr", "Français"},
	{"es", "Español"},
	{"pt", "Português"},
}

// Supported reports whether code is one of Languages.
func Supported(code string) bool {
	for _, l := range Languages {
		if l.Code == code {
			return true
		}
	}
	return false
}

// Bundle holds every catalog. It is safe for concurrent use.
type Bundle struct {
	b       *goi18n.Bundle
	matcher language.Matcher
	tags    []language.Tag
	locs    map[string]*Localizer
	files   map[string]*goi18n.MessageFile
}

// New reads the embedded catalogs.
func New() (*Bundle, error) {
	b := goi18n.NewBundle(language.English)
	b.RegisterUnmarshalFunc("toml", toml.Unmarshal)
	out := &Bundle{b: b, locs: map[string]*Localizer{}, files: map[string]*goi18n.MessageFile{}}
	for _, l := range Languages {
		name := "locales/" + l.Code + ".toml"
		buf, err := fs.ReadFile(localeFS, name)
		if err != nil {
			return nil, fmt.Errorf("i18n: %w", err)
		}
		f, err := b.ParseMessageFileBytes(buf, path.Base(name))
		if err != nil {
			return nil, fmt.Errorf("i18n: %s: %w", name, err)
		}
		out.files[l.Code] = f
		out.tags = append(out.tags, language.Make(l.Code))
	}
	out.matcher = language.NewMatcher(out.tags)
	for _, l := range Languages {
		tag := language.Make(l.Code)
		out.locs[l.Code] = &Localizer{
			Lang: l.Code,
			l:    goi18n.NewLocalizer(b, l.Code),
			p:    message.NewPrinter(tag),
		}
	}
	return out, nil
}

// MustNew is New for package-level variables: the catalogs are embedded, so an error
// is a broken build.
func MustNew() *Bundle {
	b, err := New()
	if err != nil {
		panic(err)
	}
	return b
}

// Localizer returns the Localizer of a supported language code, or English's.
func (b *Bundle) Localizer(code string) *Localizer {
	if l, ok := b.locs[code]; ok {
		return l
	}
	return b.locs[Default]
}

// Match picks the supported language closest to an Accept-Language header's list
// ("de-CH,de;q=0.9,en;q=0.8"); English when none is close or the header is empty or
// malformed.
func (b *Bundle) Match(acceptLanguage string) string {
	if strings.TrimSpace(acceptLanguage) == "" {
		return Default
	}
	tags, _, err := language.ParseAcceptLanguage(acceptLanguage)
	if err != nil || len(tags) == 0 {
		return Default
	}
	_, i, conf := b.matcher.Match(tags...)
	if conf == language.No {
		return Default
	}
	return Languages[i].Code
}

// Missing lists, per language, the messages of the English catalog that language
// lacks, and the plural forms of a message it lacks (as "id#form"), sorted. A complete
// set of catalogs gives an empty map.
func (b *Bundle) Missing() map[string][]string {
	out := map[string][]string{}
	en := messages(b.files[Default])
	for _, l := range Languages {
		have := messages(b.files[l.Code])
		for id, m := range en {
			t, ok := have[id]
			if !ok || (t.Other == "" && m.Other != "") {
				out[l.Code] = append(out[l.Code], id)
				continue
			}
			if m.One == "" {
				continue
			}
			for _, form := range pluralForms[l.Code] {
				if pluralText(t, form) == "" {
					out[l.Code] = append(out[l.Code], id+"#"+form)
				}
			}
		}
		for id := range have {
			if _, ok := en[id]; !ok {
				out[l.Code] = append(out[l.Code], id+" (not in English)")
			}
		}
		sort.Strings(out[l.Code])
		if len(out[l.Code]) == 0 {
			delete(out, l.Code)
		}
	}
	return out
}

// IDs lists the message ids of the English catalog, sorted.
func (b *Bundle) IDs() []string {
	var out []string
	for id := range messages(b.files[Default]) {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// pluralForms are the CLDR plural forms each language's counted messages need.
var pluralForms = map[string][]string{
	"en": {"one", "other"},
	"de": {"one", "other"},
	"fr": {"one", "many", "other"},
	"es": {"one", "many", "other"},
	"pt": {"one", "many", "other"},
}

func pluralText(m *goi18n.Message, form string) string {
	switch form {
	case "one":
		return m.One
	case "many":
		return m.Many
	}
	return m.Other
}

func messages(f *goi18n.MessageFile) map[string]*goi18n.Message {
	out := map[string]*goi18n.Message{}
	if f == nil {
		return out
	}
	for _, m := range f.Messages {
		out[m.ID] = m
	}
	return out
}

// Localizer turns messages into one language's text.
type Localizer struct {
	// Lang is the language's code, for <html lang> and the e-mail's Content-Language.
	Lang string
	l    *goi18n.Localizer
	p    *message.Printer
}

// T returns the message id, filled with data given as name/value pairs
// ("Name", "Ada", "Count", 3). A "Count" pair picks the plural form. A message
// missing from every catalog comes back as its id.
func (l *Localizer) T(id string, pairs ...any) string {
	cfg := &goi18n.LocalizeConfig{MessageID: id}
	if len(pairs) > 0 {
		data := make(map[string]any, len(pairs)/2)
		for i := 0; i+1 < len(pairs); i += 2 {
			k := fmt.Sprint(pairs[i])
			data[k] = pairs[i+1]
			if k == "Count" {
				cfg.PluralCount = pairs[i+1]
			}
		}
		cfg.TemplateData = data
	}
	s, err := l.l.Localize(cfg)
	if err != nil && s == "" {
		return id
	}
	return s
}

// HTML returns a message for an HTML page. A message whose id ends in _html is HTML
// already; any other message's text is escaped. The values filled in are escaped,
// except those that are template.HTML already (Strong's); a Count stays a number.
func (l *Localizer) HTML(id string, pairs ...any) template.HTML {
	isHTML := strings.HasSuffix(id, "_html")
	args := make([]any, len(pairs))
	copy(args, pairs)
	var values []string
	for i := 1; i < len(args); i += 2 {
		if fmt.Sprint(args[i-1]) == "Count" {
			continue
		}
		var v string
		switch x := args[i].(type) {
		case template.HTML:
			v = string(x)
		default:
			v = template.HTMLEscapeString(fmt.Sprint(x))
		}
		if isHTML {
			args[i] = v
			continue
		}
		// A marker from Unicode's private use area stands in for the value while
		// the message's own text is escaped.
		args[i] = string(rune(0xE000 + len(values)))
		values = append(values, v)
	}
	s := l.T(id, args...)
	if !isHTML {
		s = template.HTMLEscapeString(s)
		for i, v := range values {
			s = strings.ReplaceAll(s, string(rune(0xE000+i)), v)
		}
	}
	// The catalogs are part of the repository, and every value is escaped above.
	return template.HTML(s) //nolint:gosec // catalog text with escaped values
}

// Strong is s, escaped, in <strong>: a value for HTML that is shown in bold.
func Strong(s string) template.HTML {
	return template.HTML("<strong>" + template.HTMLEscapeString(s) + "</strong>") //nolint:gosec // escaped
}
