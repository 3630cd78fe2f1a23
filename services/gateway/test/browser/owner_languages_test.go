package browser

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestOwnerPagesInGerman: an administrator whose browser asks for nothing in
// particular picks German on the account page; from then on the owner's pages —
// packages, a package, the account — and the administrator's — users, audit log,
// webhooks — are German, with German dates, sizes and plurals, and none of their
// English headings is left. Screenshots of the packages, package and users pages in
// German.
func TestOwnerPagesInGerman(t *testing.T) {
	sys := startSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bctx := newBrowser(t, ctx)
	owner := newTab(t, bctx, sys.base)
	const password = "a long admin password"

	owner.setup("anne@example.com", "Änne Müller", password)
	owner.inboundSignIn("anne@example.com", password)
	owner.speak("en-US,en;q=0.9")
	owner.open("/account")
	if lang := owner.htmlLang(); lang != "en" {
		t.Fatalf("account page lang %q before choosing, want en", lang)
	}
	owner.do(chromedp.SetValue(css("#account-language"), "de"))
	owner.submit(chromedp.Click(css("#language-save")))
	if lang := owner.htmlLang(); lang != "de" {
		t.Fatalf("account page lang %q after choosing German", lang)
	}
	if f := owner.text(".flash"); f != "Sprache gespeichert." {
		t.Errorf("flash %q", f)
	}
	if h := owner.text("#language h2"); h != "Sprache" {
		t.Errorf("language section heading %q", h)
	}

	// A package through the German send form.
	owner.open("/send")
	owner.do(
		chromedp.SendKeys(css("#recipient_email"), "joao@example.com"),
		chromedp.SendKeys(css("#title"), "Angebot 2027"),
	)
	owner.submit(chromedp.Click(css("#package-form button[type=submit]")))
	if h := owner.text("section.card h2"); h != "Schritt 2 von 2: Dateien hinzufügen, dann senden" {
		t.Errorf("draft page step %q", h)
	}
	file, _ := writeFile(t, "angebot.pdf", 3<<20/2)
	owner.do(setFiles("#files", []string{file}))
	owner.waitJS("the upload", `!!document.querySelector('#files-table') && document.querySelector('#files-table').textContent.includes('angebot.pdf')`)
	if b := owner.text("#finalize"); b != "Link an joao@example.com senden" {
		t.Errorf("finalize button %q", b)
	}
	owner.submit(chromedp.Click(css("#finalize")))

	checkGerman := func(page string, want, english []string) {
		t.Helper()
		if lang := owner.htmlLang(); lang != "de" {
			t.Fatalf("%s: lang %q, want de", page, lang)
		}
		// textContent: the words as written, before the stylesheet capitalizes a
		// table's headings.
		body := run(owner, chromedp.Evaluate[string](`document.querySelector('main').textContent`))
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s lacks %q:\n%s", page, w, body)
			}
		}
		for _, w := range english {
			if strings.Contains(body, w) {
				t.Errorf("%s still says %q:\n%s", page, w, body)
			}
		}
	}

	owner.open("/")
	checkGerman("packages page",
		[]string{"Pakete", "Dateien senden", "Titel", "Empfänger", "Läuft ab", "Angebot 2027", "aktiv", "1,5 MiB", " Tagen", "Filtern"},
		[]string{"Packages", "Recipient", "Expires", "Send files", "active"})
	if th := run(owner, chromedp.Evaluate[string](`document.querySelector('#packages thead').textContent`)); !strings.Contains(th, "Eigentümer") {
		t.Errorf("an administrator's package list has no owner column: %q", th)
	}
	owner.docsShot("packages-de")

	owner.open(run(owner, chromedp.Evaluate[string](`document.querySelector('#packages a').getAttribute('href')`)))
	checkGerman("package page",
		[]string{"an joao@example.com", "Erstellt", "Gesendet", "Link-Aufrufe", "Download-Limit", "keins", "Empfänger", "Aktivität", "Hochgeladen von", "1,5 MiB", "Link zurückziehen…"},
		[]string{"Created", "Recipients", "Activity", "Uploaded by", "Link uses", "active"})
	if st := owner.text("#state"); st != "aktiv" {
		t.Errorf("the package's state badge %q", st)
	}
	owner.docsShot("package-de")

	owner.open("/admin/users")
	checkGerman("users page",
		[]string{"Benutzer", "E-Mail", "Rolle", "Anmeldung", "Administrator", "aktiv", "Passwort", "Benutzer hinzufügen", "Richtlinien und Kontingente"},
		[]string{"Users", "Role", "Sign-in", "Add a user", "Created"})
	owner.docsShot("admin-users-de")

	owner.open("/admin/audit")
	checkGerman("audit log", []string{"Prüfprotokoll", "Aktivitätsbericht", "Zeit", "Wer", "Was", "Paket"}, []string{"Audit log", "Who", "What", "Time"})
	owner.open("/admin/webhooks")
	checkGerman("webhooks page", []string{"Noch keine Webhooks.", "Webhook hinzufügen", "Beschreibung"}, []string{"No webhooks yet", "Add a webhook"})
}
