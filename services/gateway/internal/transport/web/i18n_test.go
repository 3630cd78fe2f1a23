package web_test

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// TestRecipientPageLanguages: the recipient's page follows Accept-Language, and a
// language picked with the switcher (?lang=) wins and is remembered in a cookie;
// English when nothing asks for another. <html lang> says which.
func TestRecipientPageLanguages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("ann@example.com", app.RoleRegular)
	out := e.sentWithFile(owner, "Fotos", "bilder.txt", "twelve bytes")
	_, in := e.sent(owner, packages.NewPackage{Title: ptr("Belege"), RecipientEmail: ptr("bob@example.com"), Direction: ptr("inbound")})

	get := func(b *browser, path, accept string) page {
		t.Helper()
		req, _ := http.NewRequest("GET", e.url+path, nil)
		if accept != "" {
			req.Header.Set("Accept-Language", accept)
		}
		return b.do(req)
	}
	for _, c := range []struct {
		name, token, accept, lang string
		want                      []string
	}{
		{"english by default", out, "", "en", []string{"Sent by", "Available until 20"}},
		{"german", out, "de-DE,de;q=0.9,en;q=0.5", "de", []string{"Gesendet von", "Verfügbar bis ", ">Herunterladen</a>", "12 B", "Gesendet mit shipfile."}},
		{"portuguese upload page", in, "pt-BR", "pt", []string{"Pedido por", "Escolha ficheiros", "Pode enviar ficheiros até ", "por ficheiro."}},
		{"french", in, "fr-CH, fr;q=0.9", "fr", []string{"Demandé par", "Choisissez des fichiers"}},
		{"spanish", out, "es", "es", []string{"Enviado por", "Disponible hasta el "}},
		{"unsupported falls back to english", out, "ja", "en", []string{"Sent by"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := get(e.browser(), "/p/"+c.token, c.accept)
			expectStatus(t, p, http.StatusOK)
			if !strings.Contains(p.body, `<html lang="`+c.lang+`" `) || p.header.Get("Content-Language") != c.lang {
				t.Errorf("lang: %q, Content-Language %q", regexp.MustCompile(`<html[^>]*>`).FindString(p.body), p.header.Get("Content-Language"))
			}
			for _, w := range c.want {
				if !strings.Contains(p.body, w) {
					t.Errorf("page lacks %q:\n%s", w, p.body)
				}
			}
			if p.header.Get("Set-Cookie") != "" {
				t.Errorf("a page nobody switched sets a cookie: %v", p.header["Set-Cookie"])
			}
		})
	}

	// The switcher: its links keep the page and set ?lang=; following one remembers
	// the choice, which then beats Accept-Language on the next page.
	b := e.browser()
	p := get(b, "/p/"+out, "de")
	if !strings.Contains(p.body, `<nav class="langs" aria-label="Sprache">`) || !strings.Contains(p.body, `href="?lang=pt" hreflang="pt" lang="pt" data-lang="pt">Português</a>`) {
		t.Fatalf("no switcher:\n%s", p.body)
	}
	if !strings.Contains(p.body, `&#34;e2e_wrong_key&#34;:&#34;Dieser Schlüssel öffnet diese Dateien nicht`) {
		t.Errorf("the encrypted pages' words are not German")
	}
	if !strings.Contains(p.body, `data-messages="{&#34;copied&#34;:&#34;Kopiert&#34;`) {
		t.Errorf("the script's words are not German: %s", regexp.MustCompile(`<html[^>]*>`).FindString(p.body))
	}
	p = get(b, "/p/"+out+"?lang=pt", "de")
	if !strings.Contains(p.body, `<html lang="pt" `) || !strings.Contains(p.body, "Enviado por") {
		t.Fatalf("?lang=pt: %s", p.body)
	}
	if ck := b.cookie("shipfile_lang"); ck == nil || ck.Value != "pt" {
		t.Fatalf("the choice is not remembered: %v", p.header["Set-Cookie"])
	}
	p = get(b, "/p/"+in, "de")
	if !strings.Contains(p.body, `<html lang="pt" `) || !strings.Contains(p.body, "Escolha ficheiros") {
		t.Fatalf("the cookie's language is not used: %s", p.body)
	}
	// A language that is not offered changes nothing and sets no cookie.
	p = get(e.browser(), "/p/"+out+"?lang=xx", "de")
	if !strings.Contains(p.body, `<html lang="de" `) || p.header.Get("Set-Cookie") != "" {
		t.Fatalf("?lang=xx: %v %s", p.header["Set-Cookie"], p.body)
	}

	// The gone page and the unlock form speak the language too.
	p = get(e.browser(), "/p/"+strings.Repeat("A", 43), "fr")
	if p.status != http.StatusGone || !strings.Contains(p.body, "Ce lien n’est plus disponible") || !strings.Contains(p.body, "<title>Lien indisponible · shipfile</title>") {
		t.Fatalf("gone page in French: %d %s", p.status, p.body)
	}
}

// sentWithFile creates an outbound package of owner's with one file and finalizes
// it: the recipient's token.
func (e *env) sentWithFile(owner app.User, title, name, content string) string {
	e.t.Helper()
	ctx := context.Background()
	p, err := e.packages.Create(ctx, owner, app.Client{}, packages.NewPackage{Title: &title, RecipientEmail: ptr("bob@example.com")})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.packages.UploadAsOwner(ctx, owner, app.Client{}, p.ID, app.Upload{Filename: name, ContentType: "text/plain", Body: bytes.NewReader([]byte(content))}); err != nil {
		e.t.Fatal(err)
	}
	_, links, err := e.packages.Finalize(ctx, owner, app.Client{}, p.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	link := links[0].MagicLink
	return link[strings.LastIndex(link, "/")+1:]
}
