package web_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
	"github.com/shipfile/shipfile/services/gateway/internal/service"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/httpapi"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// tamperer sits in front of the real provider (which names it as its issuer) and,
// when told to, replaces the ID token of the next token answers with one it signs
// itself: for another audience, expired, with another nonce (signed by a key it
// adds to the provider's published key set), or signed by a key nobody publishes.
type tamperer struct {
	mu      sync.Mutex
	mode    string
	known   *rsa.PrivateKey // published beside the provider's keys
	unknown *rsa.PrivateKey // published nowhere
}

func (tp *tamperer) set(mode string) {
	tp.mu.Lock()
	tp.mode = mode
	tp.mu.Unlock()
}

func (tp *tamperer) modify(resp *http.Response) error {
	tp.mu.Lock()
	mode := tp.mode
	tp.mu.Unlock()
	path := resp.Request.URL.Path
	if resp.StatusCode != http.StatusOK || (path != "/keys" && (path != "/oauth/token" || mode == "")) {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return err
	}
	if path == "/keys" {
		pub := jose.JSONWebKey{Key: &tp.known.PublicKey, KeyID: "test-known", Algorithm: "RS256", Use: "sig"}
		doc["keys"] = append(doc["keys"].([]any), pub)
	} else {
		raw, _ := doc["id_token"].(string)
		tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
		if err != nil {
			return err
		}
		var claims map[string]any
		if err := tok.UnsafeClaimsWithoutVerification(&claims); err != nil {
			return err
		}
		key, kid := tp.known, "test-known"
		switch mode {
		case "audience":
			claims["aud"] = []string{"another-client"}
		case "expired":
			claims["exp"], claims["iat"] = time.Now().Add(-time.Hour).Unix(), time.Now().Add(-2*time.Hour).Unix()
		case "nonce":
			claims["nonce"] = "not-the-nonce"
		case "unknown-key":
			key, kid = tp.unknown, "test-unknown"
		case "resign":
			// the same claims under the known key: the control case
		}
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid))
		if err != nil {
			return err
		}
		if doc["id_token"], err = jwt.Signed(signer).Claims(claims).Serialize(); err != nil {
			return err
		}
	}
	body, _ = json.Marshal(doc)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

type oidcEnv struct {
	*env
	provider *servicetest.OIDCProvider
	tamper   *tamperer
}

// newOIDCEnv is a gateway whose OpenID provider is a real one (deploy/oidc-provider)
// behind a tamperer, with users in the groups "staff" and "admins".
func newOIDCEnv(t *testing.T, passwordLogin string, users ...servicetest.OIDCUser) *oidcEnv {
	return newOIDCEnvWith(t, func(*service.Config) {}, passwordLogin, users...)
}

func newOIDCEnvWith(t *testing.T, adjust func(*service.Config), passwordLogin string, users ...servicetest.OIDCUser) *oidcEnv {
	t.Helper()
	known, _ := rsa.GenerateKey(rand.Reader, 2048)
	unknown, _ := rsa.GenerateKey(rand.Reader, 2048)
	tp := &tamperer{known: known, unknown: unknown}
	front := httptest.NewUnstartedServer(nil)
	issuer := "http://" + front.Listener.Addr().String()
	prov := servicetest.StartOIDCProvider(t, issuer, users)
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: prov.Addr()})
	rp.ModifyResponse = tp.modify
	front.Config.Handler = rp
	front.Start()
	t.Cleanup(front.Close)

	dbURL := pgtest.New(t, migrations.Version(), migrations.Up)
	ctx := context.Background()
	pool, err := database.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	gw := httptest.NewUnstartedServer(nil)
	base := "http://" + gw.Listener.Addr().String()
	hasher := app.NewHasher(0, 0)
	cfg := service.Config{
		PublicURL: base, MaxFileSize: 1 << 20, MaxFiles: 5, UploadPartSize: 5 << 20,
		ResumeWindow: time.Hour, UploadLease: 30 * time.Second,
		Web: service.WebConfig{SessionLifetime: time.Hour, SessionIdle: time.Hour, CookieSecure: "false", LoginFailures: 5, LoginLockout: time.Minute},
		OIDC: service.OIDCConfig{
			Issuer: issuer, ClientID: prov.ClientID, ClientSecret: prov.ClientSecret, Name: "Example",
			Scopes: "openid email profile", GroupsClaim: "groups", AdminGroups: "admins", AllowedGroups: "staff,admins",
			PasswordLogin: passwordLogin,
		},
	}
	adjust(&cfg)
	svc, err := service.New(ctx, cfg, service.Deps{
		Pool: pool, Objects: servicetest.Bucket(t), Registry: ops.NewRegistry(), Secrets: servicetest.Keyring(t), Hasher: hasher,
		API: &httpapi.Config{MaxJSONBytes: 1 << 20, MaxFileSize: 1 << 20, RatePerSecond: 1000, RateBurst: 1000},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Start(context.Background()))
	gw.Config.Handler = svc.Handler
	gw.Start()
	t.Cleanup(gw.Close)
	e := &env{t: t, url: base, pool: pool, identity: svc.Identity, packages: svc.Packages, hasher: hasher}
	return &oidcEnv{env: e, provider: prov, tamper: tp}
}

// visit follows redirects from rawURL, across hosts, until a page that is not a
// redirect or until stop says so for the next URL; it returns that page and its URL.
func (b *browser) visit(rawURL string, stop func(*url.URL) bool) (page, *url.URL) {
	b.t.Helper()
	u, _ := url.Parse(rawURL)
	for range 20 {
		req, _ := http.NewRequest("GET", u.String(), nil)
		p := b.do(req)
		if p.status < 300 || p.status > 399 {
			return p, u
		}
		next, err := u.Parse(p.header.Get("Location"))
		if err != nil {
			b.t.Fatal(err)
		}
		if stop != nil && stop(next) {
			return p, next
		}
		u = next
	}
	b.t.Fatal("too many redirects")
	return page{}, nil
}

var requestID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// providerLogin starts a sign-in at the gateway and signs in on the provider's own
// login page. With stopAtCallback it returns the gateway callback URL the provider
// sends the browser to, without visiting it; otherwise the page the sign-in ends on.
func (e *oidcEnv) providerLogin(b *browser, username, password string, stopAtCallback bool) (page, *url.URL) {
	b.t.Helper()
	p, at := b.visit(e.url+"/auth/oidc/login", nil)
	if p.status != http.StatusOK || !strings.Contains(p.body, `id="provider-login"`) {
		b.t.Fatalf("expected the provider's login page at %s, got %d:\n%.1500s", at, p.status, p.body)
	}
	m := requestID.FindStringSubmatch(p.body)
	req, _ := http.NewRequest("POST", at.Scheme+"://"+at.Host+"/login",
		strings.NewReader(url.Values{"id": {m[1]}, "username": {username}, "password": {password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	p = b.do(req)
	if p.status != http.StatusFound {
		return p, at
	}
	next, _ := at.Parse(p.header.Get("Location"))
	return b.visit(next.String(), func(u *url.URL) bool { return stopAtCallback && u.Path == "/auth/oidc/callback" })
}

// me is the signed-in user's record as the API gives it to the session cookie; nil
// when the browser has no session.
func (b *browser) me() map[string]any {
	b.t.Helper()
	req, _ := http.NewRequest("GET", b.e.url+"/api/v1/me", nil)
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return nil
	}
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != http.StatusOK {
		b.t.Fatalf("GET /api/v1/me: %d %v", resp.StatusCode, err)
	}
	return m
}

// userAuth is GET /api/v1/admin/users as the signed-in admin: each user's e-mail
// address and `auth`, joined by commas.
func (b *browser) userAuth() map[string]string {
	b.t.Helper()
	resp, err := b.client.Get(b.e.url + "/api/v1/admin/users")
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Items []struct {
			Email string   `json:"email"`
			Auth  []string `json:"auth"`
		} `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		b.t.Fatalf("GET /api/v1/admin/users: %d %v", resp.StatusCode, err)
	}
	out := map[string]string{}
	for _, u := range list.Items {
		out[u.Email] = strings.Join(u.Auth, ",")
	}
	return out
}

func staff(name string, groups ...string) servicetest.OIDCUser {
	return servicetest.OIDCUser{Username: name, Password: name + "-password", Email: name + "@example.com", EmailVerified: true,
		Name: strings.ToUpper(name[:1]) + name[1:], Groups: append([]string{"staff"}, groups...)}
}

func TestOIDCSignIn(t *testing.T) {
	unverified := staff("erin")
	unverified.EmailVerified = false
	outsider := staff("mallory")
	outsider.Groups = []string{"contractors"}
	lockedOut := staff("dave")
	lockedOut.Disabled = true
	e := newOIDCEnv(t, "", staff("alice", "admins"), staff("bob"), staff("carol"), lockedOut, unverified, outsider, staff("frank"))
	ctx := context.Background()

	signedIn := func(t *testing.T, username string) (*browser, map[string]any) {
		t.Helper()
		b := e.browser()
		p, at := e.providerLogin(b, username, username+"-password", false)
		if p.status != http.StatusOK || at.Path != "/" {
			t.Fatalf("%s: sign-in ended at %s with %d:\n%.1500s", username, at, p.status, p.body)
		}
		me := b.me()
		if me == nil || me["email"] != username+"@example.com" {
			t.Fatalf("%s: /api/v1/me = %v", username, me)
		}
		return b, me
	}
	refused := func(t *testing.T, b *browser, p page, status int, says string) {
		t.Helper()
		if p.status != status || !strings.Contains(p.body, says) {
			t.Fatalf("answer %d, want %d saying %q:\n%.1500s", p.status, status, says, p.body)
		}
		if b.cookie("shipfile_session") != nil || b.me() != nil {
			t.Fatal("a refused sign-in left a session")
		}
	}

	t.Run("admin by group, regular without", func(t *testing.T) {
		b, me := signedIn(t, "alice")
		if me["role"] != "admin" {
			t.Fatalf("alice: role %v, want admin", me["role"])
		}
		users := b.get("/admin/users")
		expectStatus(t, users, http.StatusOK)
		if !strings.Contains(users.body, `<td data-label="Sign-in">SSO</td>`) {
			t.Fatalf("the users page does not say alice signs in through SSO:\n%s", users.body)
		}
		b, me = signedIn(t, "bob")
		if me["role"] != "regular" || me["name"] != "Bob" {
			t.Fatalf("bob: %v", me)
		}
		expectStatus(t, b.get("/admin/users"), http.StatusForbidden)
		// API tokens are unchanged: a user without a password makes one on /account.
		b.get("/account")
		tp := b.post("/account/tokens", url.Values{"name": {"cli"}})
		expectStatus(t, tp, http.StatusCreated)
		raw := regexp.MustCompile(`value="(sf_[A-Za-z0-9_-]{43})"`).FindStringSubmatch(tp.body)
		if raw == nil {
			t.Fatalf("raw token not shown:\n%.1500s", tp.body)
		}
		req, _ := http.NewRequest("GET", e.url+"/api/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+raw[1])
		if p := e.browser().do(req); p.status != http.StatusOK || !strings.Contains(p.body, "bob@example.com") {
			t.Fatalf("bob's token on the API: %d %s", p.status, p.body)
		}
		u, err := e.identity.UserByEmail(ctx, "bob@example.com")
		if err != nil || u.OIDCSubject != "bob" || u.OIDCIssuer != e.provider.Issuer || strings.Join(u.AuthMethods(), ",") != "oidc" {
			t.Fatalf("bob's record: %+v %v", u, err)
		}
	})

	t.Run("removed from the admin group, no longer admin at the next sign-in", func(t *testing.T) {
		// Another active admin: group sync never demotes the last one.
		e.user("root@example.com", app.RoleAdmin)
		e.provider.PutUser(staff("alice"))
		_, me := signedIn(t, "alice")
		if me["role"] != "regular" {
			t.Fatalf("alice after leaving admins: role %v", me["role"])
		}
		e.provider.PutUser(staff("alice", "admins"))
		if _, me = signedIn(t, "alice"); me["role"] != "admin" {
			t.Fatalf("alice back in admins: role %v", me["role"])
		}
	})

	t.Run("linked to the user an admin made beforehand for SSO", func(t *testing.T) {
		made, err := e.identity.CreateUser(ctx, app.NewUser{Email: "frank@example.com", Name: "Frank", Role: app.RoleRegular})
		if err != nil {
			t.Fatal(err)
		}
		signedIn(t, "frank")
		u, err := e.identity.UserByEmail(ctx, "frank@example.com")
		if err != nil || u.ID != made.ID || strings.Join(u.AuthMethods(), ",") != "oidc" {
			t.Fatalf("frank: %+v %v (made as %d)", u, err, made.ID)
		}
		// The admin API's records say how each user signs in.
		admin, _ := signedIn(t, "alice")
		auth := admin.userAuth()
		if auth["frank@example.com"] != "oidc" || auth["bob@example.com"] != "oidc" || auth["alice@example.com"] != "oidc" ||
			auth["root@example.com"] != "password" {
			t.Fatalf("GET /api/v1/admin/users: auth %v", auth)
		}
	})

	t.Run("a user disabled in shipfile is refused", func(t *testing.T) {
		_, me := signedIn(t, "carol")
		disabled := true
		if _, err := e.identity.UpdateUser(ctx, int64(me["id"].(float64)), app.UserPatch{Disabled: &disabled}, identity.System); err != nil {
			t.Fatal(err)
		}
		b := e.browser()
		p, _ := e.providerLogin(b, "carol", "carol-password", false)
		refused(t, b, p, http.StatusForbidden, "disabled")
	})

	t.Run("a user disabled at the provider is refused there", func(t *testing.T) {
		b := e.browser()
		p, at := e.providerLogin(b, "dave", "dave-password", false)
		if p.status != http.StatusForbidden || at.Host == strings.TrimPrefix(e.url, "http://") {
			t.Fatalf("dave: %d at %s", p.status, at)
		}
		refused(t, b, p, http.StatusForbidden, "disabled")
	})

	t.Run("an unverified e-mail is refused and links nothing", func(t *testing.T) {
		made := e.user("erin@example.com", app.RoleRegular)
		before := e.count("users")
		b := e.browser()
		p, _ := e.providerLogin(b, "erin", "erin-password", false)
		refused(t, b, p, http.StatusForbidden, "not verified")
		u, err := e.identity.UserByEmail(ctx, "erin@example.com")
		if err != nil || u.ID != made.ID || u.OIDCSubject != "" || e.count("users") != before {
			t.Fatalf("erin: %+v %v; users %d → %d", u, err, before, e.count("users"))
		}
	})

	t.Run("outside the allowed groups", func(t *testing.T) {
		before := e.count("users")
		b := e.browser()
		p, _ := e.providerLogin(b, "mallory", "mallory-password", false)
		refused(t, b, p, http.StatusForbidden, "not in a group")
		if e.count("users") != before {
			t.Fatal("a refused sign-in created a user")
		}
	})

	t.Run("the authorization request: code flow with PKCE (S256), state and nonce", func(t *testing.T) {
		b := e.browser()
		var seen []url.Values
		for range 2 {
			_, authz := b.visit(e.url+"/auth/oidc/login", func(u *url.URL) bool { return u.Path == "/authorize" })
			q := authz.Query()
			if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 ||
				len(q.Get("state")) < 32 || len(q.Get("nonce")) < 32 || q.Get("client_id") != e.provider.ClientID ||
				q.Get("redirect_uri") != e.url+"/auth/oidc/callback" || !strings.Contains(" "+q.Get("scope")+" ", " openid ") {
				t.Fatalf("authorization request %s", authz)
			}
			seen = append(seen, q)
		}
		for _, k := range []string{"state", "nonce", "code_challenge"} {
			if seen[0].Get(k) == seen[1].Get(k) {
				t.Fatalf("two sign-ins share their %s", k)
			}
		}
		// The provider, like one set to require PKCE, sends a request without it back.
		q := seen[1]
		q.Del("code_challenge")
		q.Del("code_challenge_method")
		_, cb := b.visit(e.provider.Issuer+"/authorize?"+q.Encode(), func(u *url.URL) bool { return u.Path == "/auth/oidc/callback" })
		if cb.Path != "/auth/oidc/callback" || cb.Query().Get("error") != "invalid_request" {
			t.Fatalf("authorization request without PKCE came back as %s", cb)
		}
	})

	t.Run("wrong state, replayed and forged callbacks", func(t *testing.T) {
		b := e.browser()
		_, cb := e.providerLogin(b, "bob", "bob-password", true)
		if cb.Path != "/auth/oidc/callback" || cb.Query().Get("code") == "" || cb.Query().Get("state") == "" {
			t.Fatalf("callback URL %s", cb)
		}
		wrong := *cb
		q := wrong.Query()
		q.Set("state", "not-"+q.Get("state"))
		wrong.RawQuery = q.Encode()
		p, _ := b.visit(wrong.String(), nil)
		refused(t, b, p, http.StatusBadRequest, "did not start in this browser")

		// Another browser, with the right state but not its cookie.
		other := e.browser()
		p, _ = other.visit(cb.String(), nil)
		refused(t, other, p, http.StatusBadRequest, "did not start in this browser")

		b2 := e.browser()
		_, cb2 := e.providerLogin(b2, "bob", "bob-password", true)
		p, at := b2.visit(cb2.String(), nil)
		if p.status != http.StatusOK || at.Path != "/" || b2.me() == nil {
			t.Fatalf("the genuine callback: %d at %s", p.status, at)
		}
		// Replayed by the same browser, signed out meanwhile: the state was used.
		b2.client.Jar.SetCookies(at, []*http.Cookie{{Name: "shipfile_session", Value: "", MaxAge: -1, Path: "/"},
			{Name: "shipfile_oidc_state", Value: cb2.Query().Get("state"), Path: "/"}})
		p, _ = b2.visit(cb2.String(), nil)
		refused(t, b2, p, http.StatusBadRequest, "already used")

		// The provider answers with an error instead of a code.
		b4 := e.browser()
		_, authz := b4.visit(e.url+"/auth/oidc/login", func(u *url.URL) bool { return u.Path == "/authorize" })
		denied := e.url + "/auth/oidc/callback?" + url.Values{"error": {"access_denied"}, "state": {authz.Query().Get("state")}}.Encode()
		p, _ = b4.visit(denied, nil)
		refused(t, b4, p, http.StatusForbidden, "did not sign you in (access_denied)")

		// A forged code with a genuine state: the provider refuses it.
		b3 := e.browser()
		_, cb3 := e.providerLogin(b3, "bob", "bob-password", true)
		forged := *cb3
		q = forged.Query()
		q.Set("code", "forged-code")
		forged.RawQuery = q.Encode()
		p, _ = b3.visit(forged.String(), nil)
		refused(t, b3, p, http.StatusBadRequest, "did not accept")
	})

	t.Run("tokens that must not verify", func(t *testing.T) {
		e.tamper.set("resign")
		_, me := signedIn(t, "bob") // the tamperer's own signature verifies: the cases below fail for their one defect
		if me["role"] != "regular" {
			t.Fatal(me)
		}
		for _, mode := range []string{"audience", "expired", "nonce", "unknown-key"} {
			t.Run(mode, func(t *testing.T) {
				e.tamper.set(mode)
				b := e.browser()
				p, _ := e.providerLogin(b, "bob", "bob-password", false)
				refused(t, b, p, http.StatusBadRequest, "Sign in again")
			})
		}
		e.tamper.set("")
	})

	t.Run("key rotation at the provider", func(t *testing.T) {
		signedIn(t, "bob")
		for range 2 {
			kid := e.provider.RotateKeys()
			if kid == "" {
				t.Fatal("no new key id")
			}
			signedIn(t, "bob")
		}
	})

	t.Run("signing out ends the provider's session too", func(t *testing.T) {
		b, _ := signedIn(t, "bob")
		// The provider remembers the browser: a second sign-in needs no password.
		p, at := b.visit(e.url+"/auth/oidc/login", nil)
		if p.status != http.StatusOK || at.Path != "/" {
			t.Fatalf("second sign-in: %d at %s", p.status, at)
		}
		out := b.post("/logout", url.Values{})
		if out.status != http.StatusSeeOther || !strings.HasPrefix(out.header.Get("Location"), e.provider.Issuer+"/end_session?") {
			t.Fatalf("logout: %d to %q", out.status, out.header.Get("Location"))
		}
		p, at = b.visit(out.header.Get("Location"), nil)
		if at.Path != "/login" || at.Query().Get("msg") != "signed-out" || b.me() != nil {
			t.Fatalf("after the provider's sign-out: %d at %s", p.status, at)
		}
		p, _ = b.visit(e.url+"/auth/oidc/login", nil)
		if !strings.Contains(p.body, `id="provider-login"`) {
			t.Fatalf("the provider still remembers the browser: %.500s", p.body)
		}
	})

	t.Run("the sign-in page offers both", func(t *testing.T) {
		p := e.browser().get("/login")
		expectStatus(t, p, http.StatusOK)
		if !strings.Contains(p.body, "Sign in with Example") || !strings.Contains(p.body, `name="password"`) {
			t.Fatalf("login page:\n%s", p.body)
		}
	})
}

func TestPasswordLoginOff(t *testing.T) {
	e := newOIDCEnv(t, "false", staff("alice", "admins"))
	pat := e.user("pat@example.com", app.RoleAdmin)
	b := e.browser()
	p := b.get("/login")
	expectStatus(t, p, http.StatusOK)
	if strings.Contains(p.body, `name="password"`) || !strings.Contains(p.body, "Sign in with Example") {
		t.Fatalf("login page with SHIPFILE_PASSWORD_LOGIN=false:\n%s", p.body)
	}
	// The sign-in page has no form now, so its CSRF token comes from another page
	// with one (a protected link's): the refusal must be the setting's, not the
	// CSRF check's.
	_, token := e.sent(pat, packages.NewPackage{Title: ptr("Forms"), RecipientEmail: ptr("rita@example.com"),
		Direction: ptr("inbound"), Password: ptr("let me in please")})
	b.csrf = ""
	expectStatus(t, b.get("/p/"+token), http.StatusOK)
	if b.csrf == "" {
		t.Fatal("no CSRF token on the protected link's page")
	}
	p = b.post("/login", url.Values{"email": {"pat@example.com"}, "password": {"correct horse battery"}})
	expectStatus(t, p, http.StatusForbidden)
	if !strings.Contains(p.body, "Sign-in by password is turned off") {
		t.Fatalf("POST /login refused for another reason:\n%.1500s", p.body)
	}
	if b.cookie("shipfile_session") != nil {
		t.Fatal("POST /login made a session")
	}
	if p, at := e.providerLogin(b, "alice", "alice-password", false); p.status != http.StatusOK || at.Path != "/" {
		t.Fatalf("sign-in through the provider: %d at %s", p.status, at)
	}
}

func TestOIDCSignInsPerAddressAreBounded(t *testing.T) {
	e := newOIDCEnvWith(t, func(c *service.Config) { c.Edge.LinkRate, c.Edge.LinkBurst = 1, 3 }, "", staff("bob"))
	b := e.browser()
	var codes []int
	var last page
	for range 6 {
		last = b.get("/auth/oidc/login")
		codes = append(codes, last.status)
	}
	if last.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	if codes[0] != http.StatusFound || codes[len(codes)-1] != http.StatusTooManyRequests {
		t.Fatalf("statuses %v: want 302 first, 429 once over the limit", codes)
	}
	if n := e.count("oidc_logins"); n > 4 {
		t.Fatalf("%d sign-ins stored for %v", n, codes)
	}
}

func TestOIDCProviderDown(t *testing.T) {
	e := newOIDCEnvWith(t, func(c *service.Config) { c.OIDC.Issuer = "http://" + servicetest.FreeAddr(t) }, "")
	b := e.browser()
	expectStatus(t, b.get("/login"), http.StatusOK)
	p := b.get("/auth/oidc/login")
	expectStatus(t, p, http.StatusServiceUnavailable)
	if p.header.Get("Retry-After") == "" || !strings.Contains(p.body, "cannot be reached") {
		t.Fatalf("503 without Retry-After or reason: %v\n%.500s", p.header, p.body)
	}
	if n := e.count("oidc_logins"); n != 0 {
		t.Fatalf("%d sign-ins stored while the provider is down", n)
	}
}
