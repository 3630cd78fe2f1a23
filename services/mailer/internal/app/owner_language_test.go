package app

import (
	"strings"
	"testing"
)

// TestRenderOwnerLanguages: the owner's e-mails (downloads, uploads, malware found)
// and the account notices are written in the owner's language, subject and both
// parts, with plurals and sizes the language's way; an empty or unknown language is
// English.
func TestRenderOwnerLanguages(t *testing.T) {
	base := Notification{ID: 3, PackageID: "0190f0c2-7a8b-7c3d-9e4f-112233445566", Title: "Q3 report",
		RecipientEmail: "bob@example.com", RecipientName: "Bob", OwnerEmail: "alice@example.com", OwnerName: "Alice"}
	for _, c := range []struct {
		name, lang, kind, event, detail string
		files                           []NotifiedFile
		subject                         string
		text, html                      []string
	}{
		{name: "de downloaded", lang: "de", kind: NotifyDownloaded, subject: "Bob hat Q3 report heruntergeladen",
			text: []string{"Hallo Alice,", "Bob hat Q3 report heruntergeladen.", "Paket öffnen:\nhttps://x/packages/", "Sie können diese E-Mails auf der Seite des Pakets abschalten."},
			html: []string{`<html lang="de">`, "<strong>Bob</strong> hat <strong>Q3 report</strong> heruntergeladen.", ">Paket öffnen</a>"}},
		{name: "fr uploads", lang: "fr", kind: NotifyUploads, files: []NotifiedFile{{Name: "a.pdf", Size: 1536}, {Name: "b.txt", Size: 12}},
			subject: "Bob a déposé 2 fichiers dans Q3 report",
			text:    []string{"Bonjour Alice,", "- a.pdf (1,5 Kio)", "- b.txt (12 o)"},
			html:    []string{`<html lang="fr">`, "<strong>Bob</strong> a déposé 2 fichiers dans <strong>Q3 report</strong>"}},
		{name: "pt one upload", lang: "pt", kind: NotifyUploads, files: []NotifiedFile{{Name: "a.pdf", Size: 1536}},
			subject: "Bob carregou 1 ficheiro para Q3 report", text: []string{"Olá Alice,", "- a.pdf (1,5 KiB)"}},
		{name: "es infected", lang: "es", kind: NotifyInfected, subject: "Malware encontrado en Q3 report: a.pdf",
			text: []string{"El antivirus encontró Eicar en el archivo a.pdf de Q3 report.", "se ha quitado del almacenamiento"}},
		{name: "de quota", lang: "de", kind: NotifyAccount, event: AccountQuota90, detail: "9.1 GiB of 10 GiB",
			subject: "Ihr shipfile-Speicher ist zu 90 % voll",
			text:    []string{"Ihre Pakete belegen 9,1 GiB von 10 GiB Ihres Speicherkontingents", "Ihr Konto:\nhttps://x/account", "Sicherheitshinweis"},
			html:    []string{`<html lang="de">`, ">Ihr Konto öffnen</a>"}},
		{name: "fr role", lang: "fr", kind: NotifyAccount, event: AccountRoleChanged, detail: "regular -> admin",
			subject: "Votre rôle dans shipfile a changé", text: []string{"Votre rôle dans shipfile a changé : standard → administrateur."}},
		{name: "unknown language", lang: "xx", kind: NotifyAccount, event: AccountQuota90, detail: "9.1 GiB of 10 GiB",
			subject: "Your shipfile storage is 90 % full", text: []string{"Hello Alice,", "hold 9.1 GiB of 10 GiB of your storage quota"}},
		{name: "no language", kind: NotifyDownloaded, subject: "Bob downloaded Q3 report", html: []string{`<html lang="en">`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := base
			n.Kind, n.OwnerLanguage, n.AccountEvent, n.AccountDetail, n.Files = c.kind, c.lang, c.event, c.detail, c.files
			n.Filename, n.Signature = "a.pdf", "Eicar"
			e, err := RenderNotification(n, "https://x")
			if err != nil {
				t.Fatal(err)
			}
			if e.Subject != c.subject {
				t.Errorf("subject %q, want %q", e.Subject, c.subject)
			}
			want := c.lang
			if want == "" || want == "xx" {
				want = "en"
			}
			if e.Language != want {
				t.Errorf("Content-Language %q, want %q", e.Language, want)
			}
			for _, w := range c.text {
				if !strings.Contains(e.Text, w) {
					t.Errorf("text part lacks %q:\n%s", w, e.Text)
				}
			}
			for _, w := range c.html {
				if !strings.Contains(e.HTML, w) {
					t.Errorf("HTML part lacks %q:\n%s", w, e.HTML)
				}
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{"512 B": 512, "9.1 GiB": 9771050598, "10 GiB": 10 << 30, "1.5 KiB": 1536} {
		if got, ok := parseSize(s); !ok || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "9", "9 ", "x GiB", "9 GB", "9 Q", "-1 B"} {
		if _, ok := parseSize(s); ok {
			t.Errorf("parseSize(%q) accepted", s)
		}
	}
}
