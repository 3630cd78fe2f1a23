package i18n

import (
	"strings"
	"testing"
	"time"
)

// TestCatalogsComplete fails when a language lacks a message of the English catalog,
// or a plural form its counted messages need, or holds a message English lacks.
func TestCatalogsComplete(t *testing.T) {
	b := MustNew()
	if len(b.IDs()) < 50 {
		t.Fatalf("the English catalog has %d messages", len(b.IDs()))
	}
	for lang, missing := range b.Missing() {
		t.Errorf("%s.toml lacks: %s", lang, strings.Join(missing, ", "))
	}
}

// TestCatalogsTranslated: every language but English says each message its own way
// somewhere, so a catalog copied from English does not pass as a translation.
func TestCatalogsTranslated(t *testing.T) {
	b := MustNew()
	en := b.Localizer("en")
	for _, l := range Languages[1:] {
		same := 0
		for _, id := range b.IDs() {
			if b.Localizer(l.Code).T(id, "Count", 2) == en.T(id, "Count", 2) {
				same++
			}
		}
		if same > len(b.IDs())/5 {
			t.Errorf("%s: %d of %d messages are the English text", l.Code, same, len(b.IDs()))
		}
	}
}

func TestPlural(t *testing.T) {
	b := MustNew()
	for _, c := range []struct {
		lang  string
		count int
		want  string
	}{
		{"en", 1, "1 download left"},
		{"en", 0, "0 downloads left"},
		{"en", 3, "3 downloads left"},
		{"de", 1, "noch 1 Download"},
		{"de", 2, "noch 2 Downloads"},
		{"fr", 0, "0 téléchargement restant"}, // French counts 0 as one
		{"fr", 2, "2 téléchargements restants"},
		{"pt", 1, "resta 1 transferência"},
		{"pt", 5, "restam 5 transferências"},
		{"es", 1, "queda 1 descarga"},
		{"es", 1000000, "quedan 1000000 de descargas"},
	} {
		if got := b.Localizer(c.lang).T("recipient.downloads_left", "Count", c.count); got != c.want {
			t.Errorf("%s %d: %q, want %q", c.lang, c.count, got, c.want)
		}
	}
}

func TestMatch(t *testing.T) {
	b := MustNew()
	for header, want := range map[string]string{
		"":                        "en",
		"de":                      "de",
		"de-CH,de;q=0.9,en;q=0.8": "de",
		"pt-BR,pt;q=0.9":          "pt",
		"ja,zh;q=0.9":             "en",
		"fr-CA":                   "fr",
		"es-419,es;q=0.9":         "es",
		"en-GB,en;q=0.9,de;q=0.8": "en",
		";;;garbage":              "en",
		"nl,fr;q=0.5":             "fr",
	} {
		if got := b.Match(header); got != want {
			t.Errorf("Match(%q) = %q, want %q", header, got, want)
		}
	}
	if l := b.Localizer("xx"); l.Lang != "en" {
		t.Errorf("an unsupported language gives %q", l.Lang)
	}
}

func TestFormat(t *testing.T) {
	b := MustNew()
	at := time.Date(2026, 11, 28, 16, 32, 0, 0, time.UTC)
	for _, c := range []struct {
		lang, size, date, long string
	}{
		{"en", "1.5 MiB", "2026-11-28 16:32 UTC", "Saturday, 28 November 2026 at 16:32 UTC"},
		{"de", "1,5 MiB", "28.11.2026, 16:32 UTC", "Samstag, 28. November 2026 um 16:32 UTC"},
		{"fr", "1,5 Mio", "28/11/2026 16:32 UTC", "samedi 28 novembre 2026 à 16:32 UTC"},
		{"es", "1,5 MiB", "28/11/2026 16:32 UTC", "sábado, 28 de noviembre de 2026 a las 16:32 UTC"},
		{"pt", "1,5 MiB", "28/11/2026 16:32 UTC", "sábado, 28 de novembro de 2026 às 16:32 UTC"},
	} {
		l := b.Localizer(c.lang)
		if got := l.Size(3 << 19); got != c.size {
			t.Errorf("%s size %q, want %q", c.lang, got, c.size)
		}
		if got := l.Date(at); got != c.date {
			t.Errorf("%s date %q, want %q", c.lang, got, c.date)
		}
		if got := l.DateLong(at); got != c.long {
			t.Errorf("%s long date %q, want %q", c.lang, got, c.long)
		}
	}
	if got := b.Localizer("de").relative(-3 * time.Hour); got != "vor 3 Stunden" {
		t.Errorf("relative %q", got)
	}
	if got := b.Localizer("en").relative(25 * time.Hour); got != "in 25 hours" {
		t.Errorf("relative %q", got)
	}
	if got := b.Localizer("de").Size(100); got != "100 B" {
		t.Errorf("small size %q", got)
	}
}

func TestHTMLEscapesValues(t *testing.T) {
	l := MustNew().Localizer("en")
	got := string(l.HTML("mail.outbound.encrypted_html", "Owner", "<b>Eve</b>"))
	if !strings.Contains(got, "&lt;b&gt;Eve&lt;/b&gt;") || !strings.Contains(got, "<strong>end-to-end encrypted</strong>") {
		t.Errorf("HTML: %s", got)
	}
	if got := string(l.HTML("mail.outbound.encrypted_html", "Owner", Strong("A & B"))); !strings.Contains(got, "<strong>A &amp; B</strong>") {
		t.Errorf("Strong: %s", got)
	}
}

func TestHTMLEscapesPlainMessages(t *testing.T) {
	l := MustNew().Localizer("en")
	got := string(l.HTML("mail.outbound.shared", "Owner", Strong("Ann <ann@x>"), "Title", "Q&A"))
	if want := "<strong>Ann &lt;ann@x&gt;</strong> has shared files with you: Q&amp;A"; got != want {
		t.Errorf("HTML: %s, want %s", got, want)
	}
	if got := string(MustNew().Localizer("fr").HTML("mail.wrote", "Owner", "O’Brien")); got != "O’Brien a écrit :" {
		t.Errorf("HTML: %s", got)
	}
}

func TestSizeCompact(t *testing.T) {
	b := MustNew()
	for _, c := range []struct {
		lang string
		n    int64
		want string
	}{
		{"en", 10 << 20, "10 MiB"},
		{"en", 3 << 19, "1.5 MiB"},
		{"en", 10<<30 + 1, "10 GiB"},
		{"de", 10 << 30, "10 GiB"},
		{"de", 3 << 19, "1,5 MiB"},
		{"fr", 2 << 10, "2 Kio"},
		{"en", 1000, "1,000 B"},
		{"en", 2 << 50, "2 PiB"},
	} {
		if got := b.Localizer(c.lang).SizeCompact(c.n); got != c.want {
			t.Errorf("%s SizeCompact(%d) = %q, want %q", c.lang, c.n, got, c.want)
		}
	}
}
