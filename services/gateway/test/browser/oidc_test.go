package browser

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestSignInThroughProvider signs in through a real OpenID provider's own login page
// (deploy/oidc-provider), as an admin (by group) and as a regular user, with
// sign-in by password turned off; signing out ends the provider's session too.
func TestSignInThroughProvider(t *testing.T) {
	prov := servicetest.StartOIDCProvider(t, "", []servicetest.OIDCUser{
		{Username: "alice", Password: "alice-password", Email: "alice@example.com", EmailVerified: true, Name: "Alice Admin", Groups: []string{"shipfile-admins"}},
		{Username: "bob", Password: "bob-password", Email: "bob@example.com", EmailVerified: true, Name: "Bob Regular", Groups: []string{"shipfile-users"}},
	})
	_, natsURL := servicetest.StartNATS(t)
	dbURL := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	gw, gwOps := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	base := "http://" + gw
	servicetest.StartProcess(t, bins["gateway"], []string{
		"SHIPFILE_DATABASE_URL=" + dbURL, "SHIPFILE_NATS_URL=" + natsURL, "SHIPFILE_S3_BUCKET=browser-oidc",
		"SHIPFILE_LOG_LEVEL=warn", servicetest.SecretKeyEnv,
		"SHIPFILE_HTTP_ADDR=" + gw, "SHIPFILE_OPS_ADDR=" + gwOps, "SHIPFILE_PUBLIC_URL=" + base,
		"SHIPFILE_OIDC_ISSUER=" + prov.Issuer, "SHIPFILE_OIDC_CLIENT_ID=" + prov.ClientID, "SHIPFILE_OIDC_CLIENT_SECRET=" + prov.ClientSecret,
		"SHIPFILE_OIDC_NAME=Example", "SHIPFILE_OIDC_ADMIN_GROUPS=shipfile-admins", "SHIPFILE_OIDC_ALLOWED_GROUPS=shipfile-users,shipfile-admins",
		"SHIPFILE_PASSWORD_LOGIN=false",
	})
	servicetest.WaitReady(t, gwOps)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bctx := newBrowser(t, ctx)
	tb := newTab(t, bctx, base)

	signIn := func(username, name string) {
		t.Helper()
		if st := tb.open("/login"); st != http.StatusOK {
			t.Fatalf("/login: %d", st)
		}
		if n := run(tb, chromedp.Evaluate[int](`document.querySelectorAll('input[name=password]').length`)); n != 0 {
			t.Fatal("the password form is shown with SHIPFILE_PASSWORD_LOGIN=false")
		}
		if label := tb.text("#oidc-login"); label != "Sign in with Example" {
			t.Fatalf("button = %q", label)
		}
		tb.submit(chromedp.Click(css("#oidc-login")))
		if loc := tb.location(); !strings.HasPrefix(loc, prov.Issuer+"/login") {
			t.Fatalf("not on the provider's login page: %s", loc)
		}
		tb.do(chromedp.SendKeys(css("#username"), username), chromedp.SendKeys(css("#password"), username+"-password"))
		tb.shot("oidc-provider-login")
		tb.submit(chromedp.Click(css("#provider-submit")))
		tb.do(chromedp.WaitVisible(css(".me a")))
		if got := tb.text(".me a"); got != name {
			t.Fatalf("signed in as %q, want %q (at %s)", got, name, tb.location())
		}
	}
	signOut := func() {
		t.Helper()
		tb.do(chromedp.Click(css("form[action='/logout'] button")))
		tb.waitJS("back on the sign-in page", `location.pathname === '/login' && location.search.includes('signed-out')`)
	}

	signIn("alice", "Alice Admin")
	if st := tb.open("/admin/users"); st != http.StatusOK {
		t.Fatalf("alice (admin by group): /admin/users %d", st)
	}
	tb.shot("oidc-admin-users")
	signOut()

	// The provider's session ended too: Bob gets its login page, not Alice's session.
	signIn("bob", "Bob Regular")
	if st := tb.open("/admin/users"); st != http.StatusForbidden {
		t.Fatalf("bob (regular): /admin/users %d, want 403", st)
	}
	tb.open("/")
	signOut()
}
