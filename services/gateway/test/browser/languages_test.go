package browser

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// speak makes the tab's browser ask for lang (its Accept-Language header).
func (tb *tab) speak(lang string) {
	tb.t.Helper()
	if _, err := chromedp.Call(tb.ctx, network.Enable, network.EnableParams{}); err != nil {
		tb.t.Fatal(err)
	}
	if _, err := chromedp.Call(tb.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": lang}}); err != nil {
		tb.t.Fatal(err)
	}
}

// htmlLang is the page's <html lang>.
func (tb *tab) htmlLang() string {
	tb.t.Helper()
	return run(tb, chromedp.Evaluate[string](`document.documentElement.lang`))
}

// docsShot writes a screenshot for docs/WEB-UI.md into docs/screenshots when
// SHIPFILE_DOCS_SCREENSHOTS names that folder, else beside the others.
func (tb *tab) docsShot(name string) {
	tb.t.Helper()
	dir := os.Getenv("SHIPFILE_DOCS_SCREENSHOTS")
	if dir == "" {
		tb.shot(name)
		return
	}
	png := run(tb, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// TestLanguagesInBrowser: a German-speaking sender's send form is German and offers
// the recipients' language, starting at German; she picks Portuguese. The recipient's
// browser asks for Portuguese (pt-BR) and gets the page in Portuguese; the switcher
// turns it German, remembered over Accept-Language on the next visit, with the key of
// nothing lost. Screenshots of the recipient's page in every language.
func TestLanguagesInBrowser(t *testing.T) {
	sys := startSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bctx := newBrowser(t, ctx)
	sender := newTab(t, bctx, sys.base)
	recipient := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	const password = "a long admin password"

	sender.setup("anne@example.com", "Änne Müller", password)
	sender.inboundSignIn("anne@example.com", password)
	sender.speak("de-DE,de;q=0.9")
	sender.open("/send")
	if lang := sender.htmlLang(); lang != "de" {
		t.Fatalf("send form lang %q, want de", lang)
	}
	if nav := sender.text("nav[aria-label=Hauptmenü]"); !strings.Contains(nav, "Senden") || !strings.Contains(nav, "Pakete") {
		t.Fatalf("navigation not German: %q", nav)
	}
	if label := sender.text("label[for=recipient_language]"); label != "Sprache der Empfänger" {
		t.Fatalf("language field label %q", label)
	}
	if label := sender.text("label[for=recipient_email]"); label != "E-Mail-Adresse des Empfängers" {
		t.Fatalf("recipient label %q", label)
	}
	if h := sender.text("h1"); h != "Dateien senden" {
		t.Fatalf("send form heading %q", h)
	}
	if b := sender.text("#package-form button[type=submit]"); b != "Weiter: Dateien hinzufügen" {
		t.Fatalf("submit button %q", b)
	}
	if v := sender.value("#recipient_language"); v != "de" {
		t.Fatalf("recipients' language starts at %q, want the sender's de", v)
	}
	sender.do(
		chromedp.SendKeys(css("#recipient_email"), "joao@example.com"),
		chromedp.SendKeys(css("#title"), "Fotos da viagem"),
		chromedp.SetValue(css("#recipient_language"), "pt"),
	)
	sender.docsShot("send-de")
	sender.submit(chromedp.Click(css("#package-form button[type=submit]")))
	file, _ := writeFile(t, "praia.jpg", 3<<20/2)
	sender.do(setFiles("#files", []string{file}))
	sender.waitJS("the upload", `!!document.querySelector('#files-table') && document.querySelector('#files-table').textContent.includes('praia.jpg')`)
	sender.submit(chromedp.Click(css("#finalize")))
	link := sender.value("#magic-link")
	if h := sender.text("h1"); h != "Paket gesendet" {
		t.Errorf("the sent page's heading %q", h)
	}
	if label := run(sender, chromedp.Evaluate[string](`document.querySelector('.qr-box svg').getAttribute('aria-label') || document.querySelector('.qr-box svg title').textContent`)); label != "QR-Code des Links des Empfängers" {
		t.Errorf("the QR code's label %q", label)
	}

	// The recipient asks for Brazilian Portuguese: the page is Portuguese.
	recipient.speak("pt-BR,pt;q=0.9,en;q=0.5")
	if st := recipient.open(link); st != http.StatusOK {
		t.Fatalf("recipient page: %d", st)
	}
	if lang := recipient.htmlLang(); lang != "pt" {
		t.Fatalf("recipient page lang %q, want pt", lang)
	}
	if s := recipient.text("#sender"); !strings.HasPrefix(s, "Enviado por Änne Müller") {
		t.Fatalf("sender line %q", s)
	}
	body := recipient.text("body")
	for _, want := range []string{"Disponível até ", "1,5 MiB", "Transferir", "Enviado com shipfile."} {
		if !strings.Contains(body, want) {
			t.Errorf("Portuguese page lacks %q:\n%s", want, body)
		}
	}
	if cur := recipient.text(`nav.langs a[aria-current]`); cur != "Português" {
		t.Errorf("switcher marks %q", cur)
	}
	recipient.docsShot("recipient-pt")

	// The switcher: German, then remembered over Accept-Language.
	recipient.submit(chromedp.Click(css(`nav.langs a[data-lang=de]`)))
	recipient.do(chromedp.WaitVisible(css(`html[lang=de]`)))
	if s := recipient.text("#sender"); !strings.HasPrefix(s, "Gesendet von Änne Müller") {
		t.Fatalf("after the switch: %q", s)
	}
	recipient.open(link)
	if lang := recipient.htmlLang(); lang != "de" {
		t.Fatalf("the switch is not remembered: lang %q", lang)
	}
	if b := recipient.text("body"); !strings.Contains(b, "Herunterladen") || !strings.Contains(b, "1,5 MiB") {
		t.Errorf("German page:\n%s", b)
	}
	recipient.docsShot("recipient-de")
	// The page's script writes sizes and its words in the page's language too.
	if got := run(recipient, chromedp.Evaluate[string](`window.shipfileHuman(1572864)`)); got != "1,5 MiB" {
		t.Errorf("the script's size in German: %q", got)
	}
	if got := run(recipient, chromedp.Evaluate[string](`JSON.parse(document.documentElement.getAttribute("data-messages")).uploaded`)); got != "hochgeladen" {
		t.Errorf("the script's words in German: %q", got)
	}
	for _, lang := range []string{"en", "fr", "es"} {
		recipient.open(link + "?lang=" + lang)
		if got := recipient.htmlLang(); got != lang {
			t.Fatalf("?lang=%s gives %q", lang, got)
		}
		recipient.docsShot("recipient-" + lang)
	}
}
