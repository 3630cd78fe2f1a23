package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// TestRecipientLanguages: each recipient's language is taken on create (the one
// recipient's recipient_language, each entry's language) and on an added recipient,
// shown on the package's record, defaults to the sender's Accept-Language (else
// English), and a language that is not offered is a 422 naming its field.
func TestRecipientLanguages(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("ann@example.com", app.RoleRegular)

	one := a.createPackage(token, map[string]any{"title": "Fotos", "recipient_email": "bob@example.com", "recipient_language": "de"})
	if got := a.recipientsByEmail(token, one["id"].(string))["bob@example.com"]["language"]; got != "de" {
		t.Errorf("recipient_language de: %v", got)
	}

	r := a.do("POST", "/api/v1/packages", token, map[string]any{"title": "Contrato", "recipients": []map[string]any{
		{"email": "ana@example.com", "language": "pt"},
		{"email": "eve@example.com"},
	}}, "Accept-Language", "es-MX,es;q=0.9")
	expect(t, r, http.StatusCreated)
	id := r.json(t)["id"].(string)
	rs := a.recipientsByEmail(token, id)
	if rs["ana@example.com"]["language"] != "pt" || rs["eve@example.com"]["language"] != "es" {
		t.Errorf("languages: ana %v, eve %v (want pt, and the sender's es)", rs["ana@example.com"]["language"], rs["eve@example.com"]["language"])
	}

	plain := a.createPackage(token, map[string]any{"title": "Plain", "recipient_email": "bob@example.com"})
	if got := a.recipientsByEmail(token, plain["id"].(string))["bob@example.com"]["language"]; got != "en" {
		t.Errorf("no language and no Accept-Language: %v", got)
	}

	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"title": "X", "recipient_email": "bob@example.com", "recipient_language": "tlh"}, "recipient_language"},
		{map[string]any{"title": "X", "recipients": []map[string]any{{"email": "a@example.com"}, {"email": "b@example.com", "language": "EN"}}}, "recipients[1].language"},
	} {
		r := a.do("POST", "/api/v1/packages", token, c.body)
		expect(t, r, http.StatusUnprocessableEntity)
		if d, _ := r.json(t)["detail"].(string); !strings.Contains(d, c.field+" must be one of en, de, fr, es, pt") {
			t.Errorf("detail %q, want it to name %s", d, c.field)
		}
	}

	// A recipient added to an active package: their own language, or the sender's.
	id, _ = a.several(token, []string{"carl@example.com"}, nil, "a.txt")
	r = a.do("POST", "/api/v1/packages/"+id+"/recipients", token, map[string]any{"email": "dora@example.com", "language": "fr"})
	expect(t, r, http.StatusCreated)
	if got := r.json(t)["language"]; got != "fr" {
		t.Errorf("added recipient's language: %v", got)
	}
	r = a.do("POST", "/api/v1/packages/"+id+"/recipients", token, map[string]any{"email": "emil@example.com"}, "Accept-Language", "de-AT")
	expect(t, r, http.StatusCreated)
	if got := r.json(t)["language"]; got != "de" {
		t.Errorf("added recipient's default language: %v", got)
	}
}
