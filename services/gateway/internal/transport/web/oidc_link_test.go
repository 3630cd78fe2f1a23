package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/service"
)

// audited counts the audit entries of action whose detail contains about.
func (e *env) audited(action, about string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM audit_log WHERE action = $1 AND detail LIKE '%' || $2 || '%'`, action, about).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// notices lists the events of the user's account notices (the e-mails the mailer
// sends), oldest first.
func (e *env) notices(userID int64) string {
	e.t.Helper()
	var events []string
	rows, err := e.pool.Query(context.Background(), `SELECT event FROM account_notices WHERE user_id = $1 ORDER BY id`, userID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var ev string
		if err := rows.Scan(&ev); err != nil {
			e.t.Fatal(err)
		}
		events = append(events, ev)
	}
	return strings.Join(events, ",")
}

// atProvider signs in on the provider's login page the browser was sent to (from
// location, a redirect to the provider) and follows the way back to the gateway: the
// page the flow ends on and its URL.
func (e *oidcEnv) atProvider(b *browser, location, username string) (page, *url.URL) {
	b.t.Helper()
	p, at := b.visit(location, nil)
	m := requestID.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		b.t.Fatalf("expected the provider's login page at %s, got %d:\n%.1500s", at, p.status, p.body)
	}
	req, _ := http.NewRequest("POST", at.Scheme+"://"+at.Host+"/login",
		strings.NewReader(url.Values{"id": {m[1]}, "username": {username}, "password": {username + "-password"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	p = b.do(req)
	if p.status != http.StatusFound {
		b.t.Fatalf("provider sign-in of %s: %d", username, p.status)
	}
	next, _ := at.Parse(p.header.Get("Location"))
	return b.visit(next.String(), nil)
}

// A provider account whose verified e-mail is a local password admin's never becomes
// that admin: the sign-in stops on a page that says so, with no session, the admin
// unchanged and an audit entry. The admin links the identity from /account (audited
// and e-mailed), signs in by SSO afterwards, and unlinks it again.
func TestOIDCNeverTakesOverALocalAccount(t *testing.T) {
	e := newOIDCEnv(t, "", staff("pat", "admins"), staff("rita"), staff("sam", "admins"))
	ctx := context.Background()
	pat := e.user("pat@example.com", app.RoleAdmin)
	e.user("rita@example.com", app.RoleRegular)
	// An admin made by an admin without a password is not taken either.
	sam, err := e.identity.CreateUser(ctx, app.NewUser{Email: "sam@example.com", Name: "Sam", Role: app.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}

	refusedTakeover := func(t *testing.T, username string, before app.User) {
		t.Helper()
		b := e.browser()
		p, _ := e.providerLogin(b, username, username+"-password", false)
		if p.status != http.StatusConflict || !strings.Contains(p.body, "belongs to an existing shipfile account") ||
			!strings.Contains(p.body, "Link SSO") {
			t.Fatalf("%s: %d\n%.1500s", username, p.status, p.body)
		}
		if b.cookie("shipfile_session") != nil || b.me() != nil {
			t.Fatalf("%s: the refused sign-in left a session", username)
		}
		after, err := e.identity.UserByEmail(ctx, before.Email)
		if err != nil || after.OIDCSubject != "" || after.Role != before.Role || after.PasswordHash != before.PasswordHash {
			t.Fatalf("%s changed: %+v %v", username, after, err)
		}
		if e.audited("sso.link_refused", before.Email) == 0 {
			t.Fatalf("%s: no audit entry of the refused link", username)
		}
		var sessions int
		_ = e.pool.QueryRow(ctx, `SELECT count(*) FROM web_sessions WHERE user_id = $1`, before.ID).Scan(&sessions)
		if sessions != 0 {
			t.Fatalf("%s: a session was stored", username)
		}
	}
	t.Run("a password admin's address", func(t *testing.T) { refusedTakeover(t, "pat", pat) })
	t.Run("an admin without a password", func(t *testing.T) { refusedTakeover(t, "sam", sam) })

	b := e.browser()
	b.login("pat@example.com")
	t.Run("link from the account page", func(t *testing.T) {
		acc := b.get("/account")
		expectStatus(t, acc, http.StatusOK)
		if !strings.Contains(acc.body, `id="sso-link"`) {
			t.Fatalf("no Link SSO button:\n%.2000s", acc.body)
		}
		start := b.post("/account/sso/link", url.Values{})
		authz, _ := url.Parse(start.header.Get("Location"))
		if start.status != http.StatusFound || authz.Query().Get("prompt") != "login" {
			t.Fatalf("Link SSO: %d to %s", start.status, authz)
		}
		p, at := e.atProvider(b, authz.String(), "pat")
		if at.Path != "/account" || at.Query().Get("msg") != "sso-linked" || p.status != http.StatusOK {
			t.Fatalf("the link ended at %s with %d:\n%.1500s", at, p.status, p.body)
		}
		u, err := e.identity.UserByEmail(ctx, "pat@example.com")
		if err != nil || u.OIDCSubject != "pat" || u.Role != app.RoleAdmin || u.PasswordHash == "" {
			t.Fatalf("pat after linking: %+v %v", u, err)
		}
		if e.audited("sso.link", "pat@example.com") != 1 || e.notices(pat.ID) != "sso_linked" {
			t.Fatalf("link: %d audit entries, notices %q", e.audited("sso.link", "pat@example.com"), e.notices(pat.ID))
		}
		// Now pat signs in by SSO as pat.
		sso := e.browser()
		if p, at := e.providerLogin(sso, "pat", "pat-password", false); p.status != http.StatusOK || at.Path != "/" {
			t.Fatalf("SSO sign-in after linking: %d at %s", p.status, at)
		}
		if me := sso.me(); me == nil || int64(me["id"].(float64)) != pat.ID {
			t.Fatalf("SSO sign-in after linking: %v", me)
		}
		if e.audited("session.sign_in", "sso") == 0 {
			t.Fatal("no audit entry of the SSO sign-in")
		}
	})

	t.Run("an identity linked to another account is refused", func(t *testing.T) {
		rb := e.browser()
		rb.login("rita@example.com")
		rb.get("/account")
		start := rb.post("/account/sso/link", url.Values{})
		p, _ := e.atProvider(rb, start.header.Get("Location"), "pat")
		if p.status != http.StatusConflict || !strings.Contains(p.body, "already linked to another shipfile account") {
			t.Fatalf("rita linking pat's identity: %d\n%.1500s", p.status, p.body)
		}
		if u, _ := e.identity.UserByEmail(ctx, "rita@example.com"); u.OIDCSubject != "" {
			t.Fatalf("rita linked: %+v", u)
		}
	})

	t.Run("unlink ends the SSO sessions", func(t *testing.T) {
		sso := e.browser()
		if p, at := e.providerLogin(sso, "pat", "pat-password", false); p.status != http.StatusOK || at.Path != "/" {
			t.Fatalf("SSO sign-in: %d at %s", p.status, at)
		}
		acc := b.get("/account")
		if !strings.Contains(acc.body, `id="sso-unlink"`) {
			t.Fatalf("no Unlink button:\n%.2000s", acc.body)
		}
		expectRedirect(t, b.post("/account/sso/unlink", url.Values{}), "/account?msg=sso-unlinked")
		u, _ := e.identity.UserByEmail(ctx, "pat@example.com")
		if u.OIDCSubject != "" || e.audited("sso.unlink", "pat@example.com") != 1 || e.notices(pat.ID) != "sso_linked,sso_unlinked" {
			t.Fatalf("after unlinking: %+v, notices %q", u, e.notices(pat.ID))
		}
		if sso.me() != nil {
			t.Fatal("the SSO session outlived the unlink")
		}
		if b.me() == nil {
			t.Fatal("the password session ended too")
		}
	})
}

// Groups are checked again while a session lives (SHIPFILE_OIDC_RECHECK, short
// here): a user removed from the admin group at the provider loses admin at the next
// recheck, and so do their API tokens; the last active admin keeps the role; a user
// outside the allowed groups, or whose refresh the provider refuses, loses the
// session.
func TestOIDCRecheck(t *testing.T) {
	const recheck = time.Second
	e := newOIDCEnvWith(t, func(c *service.Config) { c.OIDC.Recheck = recheck }, "",
		staff("alice", "admins"), staff("bob", "admins"), staff("carol"), staff("dan"))
	ctx := context.Background()
	signIn := func(username string) *browser {
		t.Helper()
		b := e.browser()
		if p, at := e.providerLogin(b, username, username+"-password", false); p.status != http.StatusOK || at.Path != "/" {
			t.Fatalf("%s: sign-in ended at %s with %d", username, at, p.status)
		}
		return b
	}
	role := func(b *browser) any {
		if me := b.me(); me != nil {
			return me["role"]
		}
		return nil
	}
	alice, bob, carol, dan := signIn("alice"), signIn("bob"), signIn("carol"), signIn("dan")
	if role(alice) != "admin" || role(bob) != "admin" {
		t.Fatalf("roles %v %v", role(alice), role(bob))
	}
	var sealed string
	if err := e.pool.QueryRow(ctx, `SELECT oidc_refresh FROM web_sessions s JOIN users u ON u.id = s.user_id WHERE u.email = 'alice@example.com'`).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sealed, "sbx1:") {
		t.Fatalf("the refresh token is not sealed: %.10s…", sealed)
	}
	aliceUser, _ := e.identity.UserByEmail(ctx, "alice@example.com")
	_, token, err := e.identity.CreateToken(ctx, aliceUser.ID, "cli", nil, identity.System)
	if err != nil {
		t.Fatal(err)
	}
	asToken := func(path string) int {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		return e.browser().do(req).status
	}
	if s := asToken("/api/v1/admin/users"); s != http.StatusOK {
		t.Fatalf("alice's token as admin: %d", s)
	}

	t.Run("removed from the admin group: regular at the next recheck, tokens too", func(t *testing.T) {
		e.provider.PutUser(staff("alice"))
		servicetest.WaitFor(t, 15*time.Second, "alice regular", func() bool { return role(alice) == "regular" })
		// The session reads the role from the database; a token's owner may be served
		// from the token cache, which the recheck empties right after its commit (and
		// the change feed on other instances within identity.DefaultTokenFeedWindow).
		// A request in between may still act as admin, never one after the window.
		deadline := time.Now().Add(identity.DefaultTokenFeedWindow + time.Second)
		for s := asToken("/api/v1/admin/users"); s != http.StatusForbidden; s = asToken("/api/v1/admin/users") {
			if time.Now().After(deadline) {
				t.Fatalf("alice's token after the demotion: %d, want 403 within the token cache's window", s)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if e.audited("user.role", "(alice@example.com): admin -> regular, by group sync") != 1 || e.notices(aliceUser.ID) != "role_changed" {
			t.Fatalf("demotion: audit %d, notices %q", e.audited("user.role", "alice@example.com"), e.notices(aliceUser.ID))
		}
	})

	t.Run("the last active admin keeps the role", func(t *testing.T) {
		e.provider.PutUser(staff("bob"))
		changed := time.Now()
		// Two rechecks of bob's session after the change.
		servicetest.WaitFor(t, 15*time.Second, "two rechecks of bob's session", func() bool {
			var next time.Time
			err := e.pool.QueryRow(ctx, `SELECT max(oidc_check_at) FROM web_sessions s JOIN users u ON u.id = s.user_id WHERE u.email = 'bob@example.com'`).Scan(&next)
			return err == nil && next.After(changed.Add(2*recheck))
		})
		if role(bob) != "admin" {
			t.Fatalf("the last active admin was demoted: %v", role(bob))
		}
	})

	t.Run("outside the allowed groups: the session ends", func(t *testing.T) {
		out := staff("carol")
		out.Groups = []string{"contractors"}
		e.provider.PutUser(out)
		servicetest.WaitFor(t, 15*time.Second, "carol signed out", func() bool { return carol.me() == nil })
		if e.audited("session.ended", "no longer in SHIPFILE_OIDC_ALLOWED_GROUPS") != 1 {
			t.Fatal("no audit entry of the ended session")
		}
	})

	t.Run("a refused refresh ends the session", func(t *testing.T) {
		off := staff("dan")
		off.Disabled = true
		e.provider.PutUser(off)
		servicetest.WaitFor(t, 15*time.Second, "dan signed out", func() bool { return dan.me() == nil })
		if e.audited("session.ended", "refused the refresh token") != 1 {
			t.Fatal("no audit entry of the ended session")
		}
		if role(bob) != "admin" || role(alice) != "regular" {
			t.Fatal("the others' sessions changed")
		}
	})
}

// The test provider's admin API needs its token, and never shows a password.
func TestOIDCProviderAdminAPI(t *testing.T) {
	prov := servicetest.StartOIDCProvider(t, "", []servicetest.OIDCUser{staff("alice", "admins")})
	if status, _ := prov.AdminRequest("GET", "/admin/users", false); status != http.StatusUnauthorized {
		t.Fatalf("GET /admin/users without the token: %d, want 401", status)
	}
	if status, _ := prov.AdminRequest("POST", "/admin/rotate-keys", false); status != http.StatusUnauthorized {
		t.Fatalf("POST /admin/rotate-keys without the token: %d, want 401", status)
	}
	status, body := prov.AdminRequest("GET", "/admin/users", true)
	if status != http.StatusOK || !strings.Contains(string(body), "alice@example.com") {
		t.Fatalf("GET /admin/users with the token: %d %s", status, body)
	}
	if strings.Contains(string(body), "password") {
		t.Fatalf("the admin API shows passwords: %s", body)
	}
}
