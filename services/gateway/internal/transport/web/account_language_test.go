package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestAccountLanguage: the account page's language is stored with the user: their
// pages are in it in any browser that has not picked another with the switcher, an
// unknown language is refused beside its field, and "automatic" clears it.
func TestAccountLanguage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u, b := e.signedIn("ann@example.com")

	b.get("/account")
	expectRedirect(t, b.post("/account/language", url.Values{"language": {"de"}}), "/account?msg=language-saved")
	saved := b.get("/account?msg=language-saved")
	for _, want := range []string{`<html lang="de"`, "Sprache gespeichert.", `<option value="de" lang="de" selected>`, "API-Tokens"} {
		if !strings.Contains(saved.body, want) {
			t.Fatalf("account page after saving German lacks %q:\n%.3000s", want, saved.body)
		}
	}
	if got := storedLanguage(t, e, u.ID); got != "de" {
		t.Fatalf("stored language %q", got)
	}

	// Another browser, with no cookie and an English Accept-Language: the stored
	// language decides.
	other := e.browser()
	other.login("ann@example.com")
	req, _ := http.NewRequest("GET", e.url+"/", nil)
	req.Header.Set("Accept-Language", "en-US,en;q=0.9")
	home := other.do(req)
	expectStatus(t, home, http.StatusOK)
	for _, want := range []string{`<html lang="de"`, "<h1>Pakete</h1>", "Hier gibt es noch keine Pakete.", ">Abmelden</button>"} {
		if !strings.Contains(home.body, want) {
			t.Fatalf("packages page of a German user lacks %q:\n%.3000s", want, home.body)
		}
	}
	// The switcher still wins in that browser.
	if fr := other.get("/?lang=fr"); !strings.Contains(fr.body, `<html lang="fr"`) {
		t.Fatalf("?lang=fr for a German user:\n%.1000s", fr.body)
	}

	bad := b.post("/account/language", url.Values{"language": {"xx"}})
	expectStatus(t, bad, http.StatusUnprocessableEntity)
	if fieldError(bad, "language") == "" {
		t.Fatalf("an unknown language has no error beside its field:\n%.3000s", bad.body)
	}

	expectRedirect(t, b.post("/account/language", url.Values{"language": {""}}), "/account?msg=language-saved")
	if got := storedLanguage(t, e, u.ID); got != "NULL" {
		t.Fatalf("language after choosing automatic %q", got)
	}
	third := e.browser()
	third.login("ann@example.com")
	if home := third.get("/"); !strings.Contains(home.body, `<html lang="en"`) {
		t.Fatalf("packages page after choosing automatic:\n%.1000s", home.body)
	}
}

// storedLanguage is users.language of the user, "NULL" for none.
func storedLanguage(t *testing.T, e *env, id int64) string {
	t.Helper()
	var lang string
	if err := e.pool.QueryRow(context.Background(), `SELECT coalesce(language, 'NULL') FROM users WHERE id = $1`, id).Scan(&lang); err != nil {
		t.Fatal(err)
	}
	return lang
}
