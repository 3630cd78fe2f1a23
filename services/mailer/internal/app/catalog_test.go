package app

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	// templateAction is one {{…}} action or comment, over several lines too.
	templateAction = regexp.MustCompile(`(?s)\{\{.*?\}\}`)
	htmlTag        = regexp.MustCompile(`(?s)<[^>]*>`)
	htmlEntity     = regexp.MustCompile(`&[a-zA-Z]+;|&#[0-9]+;`)
	// userAttr is an attribute whose value people read or hear.
	userAttr = regexp.MustCompile(`\b(title|alt|aria-label)="([^"]*)"`)
	// messageRef is a catalog message named in a template.
	messageRef = regexp.MustCompile(`\.(?:T|HTML) "([^"]+)"`)
)

// TestMailTemplatesUseCatalog fails when an e-mail template (text or HTML) holds
// words outside the catalog (pkg/i18n/locales), or names a message the English
// catalog lacks: every e-mail is written in its reader's language.
func TestMailTemplatesUseCatalog(t *testing.T) {
	ids := map[string]bool{}
	for _, id := range catalog.IDs() {
		ids[id] = true
	}
	names, err := fs.Glob(templateFS, "templates/*.tmpl")
	if err != nil || len(names) < 9 {
		t.Fatalf("templates %v, %v", names, err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			b, err := templateFS.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			src := string(b)
			for _, m := range messageRef.FindAllStringSubmatch(src, -1) {
				if !ids[m[1]] {
					t.Errorf("message %q is not in the catalog", m[1])
				}
			}
			text := templateAction.ReplaceAllString(src, "\x00")
			if strings.HasSuffix(name, ".html.tmpl") {
				for _, tag := range htmlTag.FindAllString(text, -1) {
					for _, a := range userAttr.FindAllStringSubmatch(tag, -1) {
						if w := words(a[2]); len(w) > 0 {
							t.Errorf("attribute %s=%q holds text outside the catalog", a[1], a[2])
						}
					}
				}
				text = htmlEntity.ReplaceAllString(htmlTag.ReplaceAllString(text, " "), " ")
			}
			if w := words(text); len(w) > 0 {
				t.Errorf("text outside the catalog: %q", w)
			}
		})
	}
}

// TestMailTemplateScanCatchesText: the scan sees a word in a text part and in an HTML
// part, and none in actions and tags.
func TestMailTemplateScanCatchesText(t *testing.T) {
	for src, want := range map[string]int{
		`{{.L.T "mail.hello"}}`:                0,
		"Hello {{.Name}},\n--\n":               1,
		`<p style="margin:0">{{.L.T "x"}}</p>`: 0,
		`<a href="{{.Link}}">Open it</a>`:      2,
	} {
		text := htmlEntity.ReplaceAllString(htmlTag.ReplaceAllString(templateAction.ReplaceAllString(src, "\x00"), " "), " ")
		if got := len(words(text)); got != want {
			t.Errorf("%s: %d words, want %d", src, got, want)
		}
	}
}

// words lists the runs of letters of s.
func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) })
}
