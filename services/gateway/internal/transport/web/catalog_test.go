package web

import (
	"io/fs"
	"path"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/webhookadmin"
)

// pageTemplates are every page template (templates/*.html): each must hold no text
// for people outside the catalogs (pkg/i18n/locales).
func pageTemplates(t *testing.T) []string {
	t.Helper()
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 20 {
		t.Fatalf("found %d templates: %v", len(names), names)
	}
	for i, n := range names {
		names[i] = path.Base(n)
	}
	return names
}

var (
	// templateAction is one {{…}} action or comment, over several lines too.
	templateAction = regexp.MustCompile(`(?s)\{\{.*?\}\}`)
	// scriptOrStyle is an element whose content is not text for people.
	scriptOrStyle = regexp.MustCompile(`(?is)<(script|style)\b.*?</(script|style)>`)
	htmlTag       = regexp.MustCompile(`(?s)<[^>]*>`)
	htmlEntity    = regexp.MustCompile(`&[a-zA-Z]+;|&#[0-9]+;`)
	// userAttr is an attribute whose value people read or hear; a value only on a
	// button-like input (buttonInput), the others' values being data for the server.
	userAttr    = regexp.MustCompile(`\b(placeholder|title|aria-label|alt|value)="([^"]*)"`)
	buttonInput = regexp.MustCompile(`(?i)^<input\b[^>]*\btype="(submit|button|reset)"`)
	// messageRef is a catalog message named in a template.
	messageRef = regexp.MustCompile(`\.(?:T|HTML) "([^"]+)"`)
)

// untranslatable are the words a template may hold as they are: the product's name
// and abbreviations every language writes the same way.
var untranslatable = map[string]bool{"shipfile": true, "IP": true, "SSO": true}

// TestTemplatesUseCatalog fails when a page template holds text for people
// outside the catalog (a text node, or a placeholder, title, aria-label or alt attribute,
// or a button's value, with words in it), or names a message the English catalog lacks.
func TestTemplatesUseCatalog(t *testing.T) {
	ids := map[string]bool{}
	for _, id := range catalog.IDs() {
		ids[id] = true
	}
	for _, name := range pageTemplates(t) {
		t.Run(name, func(t *testing.T) {
			b, err := templateFS.ReadFile("templates/" + name)
			if err != nil {
				t.Fatal(err)
			}
			src := string(b)
			for _, m := range messageRef.FindAllStringSubmatch(src, -1) {
				if !ids[m[1]] {
					t.Errorf("message %q is not in the catalog", m[1])
				}
			}
			// Actions become a NUL: what is left is the template's own text.
			text := templateAction.ReplaceAllString(src, "\x00")
			text = scriptOrStyle.ReplaceAllString(text, "")
			for _, tag := range htmlTag.FindAllString(text, -1) {
				for _, a := range userAttr.FindAllStringSubmatch(tag, -1) {
					if a[1] == "value" && !buttonInput.MatchString(tag) {
						continue
					}
					if isURL(a[2]) {
						continue // an example address, the same in every language
					}
					if words := wordsIn(a[2]); len(words) > 0 {
						t.Errorf("attribute %s=%q holds text outside the catalog: %s", a[1], a[2], tag)
					}
				}
			}
			text = htmlTag.ReplaceAllString(text, " ")
			text = htmlEntity.ReplaceAllString(text, " ")
			if words := wordsIn(text); len(words) > 0 {
				t.Errorf("text outside the catalog: %q", words)
			}
		})
	}
}

// wordsIn lists the words (runs of letters) of s that are not untranslatable.
func wordsIn(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) }) {
		if !untranslatable[w] {
			out = append(out, w)
		}
	}
	return out
}

// TestTemplateScanCatchesText: the scan above sees a word in a text node and in a
// title, and none in actions, tags and entities.
func TestTemplateScanCatchesText(t *testing.T) {
	for src, want := range map[string]int{
		`<p>{{.L.T "x"}}</p>`:                          0,
		`<p>Hello {{.Name}}</p>`:                       1,
		`<a title="Open it" href="/">{{.L.T "x"}}</a>`: 0, // the attribute: checked apart
		`<p>&lt;{{.Email}}&gt; · shipfile</p>`:         0,
		`{{/* a comment with words */}}<br>`:           0,
	} {
		text := htmlEntity.ReplaceAllString(htmlTag.ReplaceAllString(templateAction.ReplaceAllString(src, "\x00"), " "), " ")
		if got := len(wordsIn(text)); got != want {
			t.Errorf("%s: %d words, want %d", src, got, want)
		}
	}
	if a := userAttr.FindStringSubmatch(`<a title="Open it">`); a == nil || len(wordsIn(a[2])) != 2 {
		t.Errorf("the title is not seen: %v", a)
	}
	if !buttonInput.MatchString(`<input type="submit" value="Send it">`) || buttonInput.MatchString(`<input type="radio" value="key">`) {
		t.Error("a button's value is told apart wrongly from a radio's")
	}
}

// isURL reports whether s is an absolute http(s) URL and nothing else.
func isURL(s string) bool {
	return (strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")) && !strings.ContainsAny(s, " \t\n")
}

// TestComputedMessages: the messages a template names by a value (state., linkstate.,
// delivery., role., dir. followed by the value) exist for every value the
// application gives.
func TestComputedMessages(t *testing.T) {
	ids := map[string]bool{}
	for _, id := range catalog.IDs() {
		ids[id] = true
	}
	for _, id := range []string{
		"state." + string(app.StateDraft), "state." + string(app.StateActive), "state." + string(app.StateRevoked), "state." + string(app.StateExpired),
		"linkstate." + string(app.LinkNone), "linkstate." + string(app.LinkActive), "linkstate." + string(app.LinkRevoked),
		"delivery." + string(webhookadmin.DeliveryPending), "delivery." + string(webhookadmin.DeliverySucceeded), "delivery." + string(webhookadmin.DeliveryFailed),
		"role." + string(app.RoleAdmin), "role." + string(app.RoleRegular),
		"dir." + string(app.Outbound), "dir." + string(app.Inbound),
	} {
		if !ids[id] {
			t.Errorf("message %q is not in the catalog", id)
		}
	}
}
