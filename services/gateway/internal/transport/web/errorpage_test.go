package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestErrorPageInTheRequestLanguage: an HTML error page is in the language the
// request's pages are in (Accept-Language here), its title the status's.
func TestErrorPageInTheRequestLanguage(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	for _, c := range []struct{ lang, title, home string }{
		{"de", "Nicht gefunden", "Zu shipfile"},
		{"pt-BR,pt;q=0.9", "Não encontrado", "Ir para o shipfile"},
		{"", "Not Found", "Go to shipfile"},
	} {
		req, _ := http.NewRequest("GET", e.url+"/no-such-page", nil)
		if c.lang != "" {
			req.Header.Set("Accept-Language", c.lang)
		}
		p := b.do(req)
		if p.status != http.StatusNotFound || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") {
			t.Fatalf("%q: %d %s", c.lang, p.status, p.header.Get("Content-Type"))
		}
		if !strings.Contains(p.body, "<h1>"+c.title+"</h1>") || !strings.Contains(p.body, c.home) {
			t.Errorf("%q: the page lacks %q or %q:\n%.600s", c.lang, c.title, c.home, p.body)
		}
	}
}
