package web

import "testing"

// TestLocalizeText: the handlers' fixed English texts with a number in them are said
// in the page's language; other text is left as it is.
func TestLocalizeText(t *testing.T) {
	for _, c := range []struct{ lang, in, want string }{
		{"de", "Too many failed sign-ins. Try again in 1 minute.", "Zu viele fehlgeschlagene Anmeldungen. Versuchen Sie es in 1 Minute erneut."},
		{"fr", "Too many failed sign-ins. Try again in 5 minutes.", "Trop de connexions échouées. Réessayez dans 5 minutes."},
		{"en", "Too many failed sign-ins. Try again in 5 minutes.", "Too many failed sign-ins. Try again in 5 minutes."},
		{"pt", "Webhook 12", "Webhook 12"},
		{"de", "Webhook 12 x", "Webhook 12 x"},
		{"es", "Account", "Cuenta"},
		{"de", "Q3 report", "Q3 report"},
	} {
		if got := localizeText(catalog.Localizer(c.lang), c.in); got != c.want {
			t.Errorf("%s %q: %q, want %q", c.lang, c.in, got, c.want)
		}
	}
}
