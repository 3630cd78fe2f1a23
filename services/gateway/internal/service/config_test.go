package service

import "testing"

// TestAPISecureCookies: SHIPFILE_COOKIE_SECURE reaches the REST API too (its link
// grant cookie), not only the web UI.
func TestAPISecureCookies(t *testing.T) {
	for _, c := range []struct {
		setting, publicURL string
		want               bool
	}{
		{"true", "http://gateway.internal", true},
		{"auto", "https://files.example.com", true},
		{"auto", "http://127.0.0.1:8080", false},
		{"false", "https://files.example.com", false},
	} {
		cfg := Config{PublicURL: c.publicURL, Web: WebConfig{CookieSecure: c.setting}}
		if got := cfg.API().SecureCookies; got != c.want {
			t.Errorf("SHIPFILE_COOKIE_SECURE=%s, public URL %s: API SecureCookies = %v, want %v", c.setting, c.publicURL, got, c.want)
		}
	}
}
