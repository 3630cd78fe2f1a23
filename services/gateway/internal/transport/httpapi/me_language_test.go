package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// TestPatchMeLanguage: PATCH /api/v1/me sets the user's language, keeps it when the
// field is absent, clears it with null, and refuses a language it does not have.
func TestPatchMeLanguage(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("lang@example.com", app.RoleRegular)

	for _, c := range []struct {
		name   string
		body   any
		status int
		want   any // the language after the call
	}{
		{"set", map[string]any{"language": "de"}, http.StatusOK, "de"},
		{"absent keeps it", map[string]any{}, http.StatusOK, "de"},
		{"another", map[string]any{"language": "pt"}, http.StatusOK, "pt"},
		{"unsupported", map[string]any{"language": "xx"}, http.StatusUnprocessableEntity, "pt"},
		{"empty string", map[string]any{"language": ""}, http.StatusUnprocessableEntity, "pt"},
		{"wrong type", map[string]any{"language": 3}, http.StatusUnprocessableEntity, "pt"},
		{"null clears it", map[string]any{"language": nil}, http.StatusOK, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := a.do("PATCH", "/api/v1/me", token, c.body)
			expect(t, r, c.status)
			if c.status == http.StatusOK {
				if got := r.json(t)["language"]; got != c.want {
					t.Errorf("answer's language %v, want %v", got, c.want)
				}
			}
			g := a.do("GET", "/api/v1/me", token, nil)
			expect(t, g, http.StatusOK)
			if got := g.json(t)["language"]; got != c.want {
				t.Errorf("GET /me language %v, want %v", got, c.want)
			}
		})
	}
}

// TestStoredLanguageIsTheSenders: a sender who chose a language gives it to the
// recipients that name none, whatever the request's Accept-Language; one who chose
// none gives the Accept-Language's.
func TestStoredLanguageIsTheSenders(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("sender@example.com", app.RoleRegular)
	expect(t, a.do("PATCH", "/api/v1/me", token, map[string]any{"language": "pt"}), http.StatusOK)
	for _, accept := range []string{"", "fr-FR,fr;q=0.9"} {
		r := a.do("POST", "/api/v1/packages", token, map[string]any{"title": "Fotos", "recipient_email": "bob@example.com"}, "Accept-Language", accept)
		expect(t, r, http.StatusCreated)
		if got := a.recipientsByEmail(token, r.json(t)["id"].(string))["bob@example.com"]["language"]; got != "pt" {
			t.Errorf("Accept-Language %q: recipient's language %v, want the sender's pt", accept, got)
		}
	}
	expect(t, a.do("PATCH", "/api/v1/me", token, map[string]any{"language": nil}), http.StatusOK)
	r := a.do("POST", "/api/v1/packages", token, map[string]any{"title": "Fotos", "recipient_email": "bob@example.com"}, "Accept-Language", "fr-FR")
	expect(t, r, http.StatusCreated)
	if got := a.recipientsByEmail(token, r.json(t)["id"].(string))["bob@example.com"]["language"]; got != "fr" {
		t.Errorf("no stored language: recipient's language %v, want fr", got)
	}
}
