package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/gin-gonic/gin"
	"golang.org/x/oauth2"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
)

// OIDCConfig is the organization's OpenID provider (docs/WEB-UI.md, "Signing in with
// the organization's accounts").
type OIDCConfig struct {
	Issuer, ClientID, ClientSecret string
	// Name is the button's label: "Sign in with {Name}".
	Name        string
	Scopes      []string
	GroupsClaim string
	Policy      identity.OIDCPolicy
	// PublicURL is the gateway's public base URL: the callback's, and where the
	// provider sends the browser back after signing out.
	PublicURL string
}

// oidcLoginTTL is how long a sign-in may stay at the provider.
const oidcLoginTTL = 10 * time.Minute

// oidcDiscoveryRetry is how soon a failed discovery is tried again.
const oidcDiscoveryRetry = 5 * time.Second

// oidcHTTP talks to the provider: every exchange is bounded.
var oidcHTTP = &http.Client{Timeout: 10 * time.Second}

// oidcClient is the relying party: go-oidc's provider (discovery, and the
// provider's key set, fetched again when a token names a key it does not know, so
// keys may rotate) and x/oauth2's code exchange. Discovery happens at the first
// sign-in and is retried after a failure, so the gateway starts while the provider
// is down.
type oidcClient struct {
	cfg OIDCConfig

	// discovering serialises discovery (network I/O); mu guards the fields below
	// for moments only, so pages that read them never wait on the provider.
	discovering sync.Mutex
	mu          sync.Mutex
	ready       bool
	provider    *oidc.Provider
	oauth       oauth2.Config
	verifier    *oidc.IDTokenVerifier
	endSession  string
	failedAt    time.Time
	failure     error
}

func newOIDCClient(cfg OIDCConfig) *oidcClient {
	if cfg.Name == "" {
		cfg.Name = "SSO"
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{oidc.ScopeOpenID, "email", "profile"}
	}
	// A refresh token lets the gateway check the groups again while a session lives.
	if !slices.Contains(cfg.Scopes, oidc.ScopeOfflineAccess) {
		cfg.Scopes = append(slices.Clone(cfg.Scopes), oidc.ScopeOfflineAccess)
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	return &oidcClient{cfg: cfg}
}

// discover returns the client once the provider's discovery document was read.
func (o *oidcClient) discover() error {
	if o.isReady() {
		return nil
	}
	o.discovering.Lock()
	defer o.discovering.Unlock()
	o.mu.Lock()
	ready, failure, failedAt := o.ready, o.failure, o.failedAt
	o.mu.Unlock()
	if ready {
		return nil
	}
	if failure != nil && time.Since(failedAt) < oidcDiscoveryRetry {
		return failure
	}
	// go-oidc keeps the context's HTTP client for its later key fetches.
	ctx := oidc.ClientContext(context.Background(), oidcHTTP)
	p, err := oidc.NewProvider(ctx, o.cfg.Issuer)
	if err != nil {
		o.mu.Lock()
		o.failure, o.failedAt = err, time.Now()
		o.mu.Unlock()
		return err
	}
	var extra struct {
		EndSession string `json:"end_session_endpoint"`
	}
	_ = p.Claims(&extra)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.provider, o.endSession = p, extra.EndSession
	o.verifier = p.VerifierContext(ctx, &oidc.Config{ClientID: o.cfg.ClientID})
	o.oauth = oauth2.Config{
		ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: o.cfg.PublicURL + "/auth/oidc/callback", Scopes: o.cfg.Scopes,
	}
	o.ready, o.failure = true, nil
	return nil
}

func (o *oidcClient) isReady() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ready
}

// oidcStateCookie is the cookie that binds a sign-in at the provider to this browser.
func (w *Web) oidcStateCookie() string {
	if w.cookies.secure {
		return "__Host-shipfile_oidc_state"
	}
	return "shipfile_oidc_state"
}

// oidcSignedInCookie marks a browser signed in through the provider, so that
// signing out also ends the provider's session.
func (w *Web) oidcSignedInCookie() string {
	if w.cookies.secure {
		return "__Host-shipfile_oidc"
	}
	return "shipfile_oidc"
}

// providerUnavailable is the answer while the provider cannot be reached.
func providerUnavailable() error {
	return app.Busy(30*time.Second, "the identity provider cannot be reached; try again in a moment")
}

// oidcLogin sends the browser to the provider: authorization code flow with PKCE
// (S256), a state bound to this browser by a cookie and a nonce, all three kept
// server-side until the callback.
func (w *Web) oidcLogin(c *gin.Context) {
	w.startOIDC(c, localPath(c.Query("next")), 0)
}

// startOIDC sends the browser to the provider for a sign-in, or, with linkUserID, for
// linking the identity to that signed-in user (the provider is asked to ask for the
// password again).
func (w *Web) startOIDC(c *gin.Context, next string, linkUserID int64) {
	if w.oidc == nil {
		_ = c.Error(app.NotFound("page"))
		return
	}
	if err := w.oidc.discover(); err != nil {
		w.log.Warn("OpenID provider discovery failed", "issuer", w.oidc.cfg.Issuer, "err", err)
		_ = c.Error(providerUnavailable())
		return
	}
	state, nonce, verifier := rand.Text()+rand.Text(), rand.Text()+rand.Text(), oauth2.GenerateVerifier()
	sum := sha256.Sum256([]byte(state))
	now := time.Now()
	if err := w.oidcStore.InsertOIDCLogin(c.Request.Context(), identity.OIDCLogin{
		StateHash: sum[:], Nonce: nonce, Verifier: verifier, Next: next, CreatedAt: now, LinkUserID: linkUserID,
	}); err != nil {
		_ = c.Error(err)
		return
	}
	_ = w.oidcStore.DeleteStaleOIDCLogins(c.Request.Context(), now.Add(-oidcLoginTTL))
	w.setCookie(c, w.oidcStateCookie(), state, int(oidcLoginTTL.Seconds()))
	opts := []oauth2.AuthCodeOption{oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)}
	if linkUserID != 0 {
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "login"))
	}
	c.Redirect(http.StatusFound, w.oidc.oauth.AuthCodeURL(state, opts...))
}

// oidcFail ends a callback on an error page: no session, and the sign-in cannot
// be tried again.
func (w *Web) oidcFail(c *gin.Context, status int, detail string, err error) {
	if err != nil {
		w.log.Warn("OpenID sign-in refused", "why", detail, "err", err)
	}
	w.setCookie(c, w.oidcStateCookie(), "", -1)
	w.ErrorPage(c, status, detail)
	c.Abort()
}

// oidcCallback takes the provider's answer: the state must be this browser's and
// unused, the code is exchanged with the PKCE verifier, and the ID token verified
// (signature by the provider's keys, issuer, audience, expiry, then the nonce).
func (w *Web) oidcCallback(c *gin.Context) {
	if w.oidc == nil {
		_ = c.Error(app.NotFound("page"))
		return
	}
	ctx := c.Request.Context()
	const again = " Sign in again."
	state := c.Query("state")
	cookie, _ := c.Cookie(w.oidcStateCookie())
	if state == "" || len(state) > 512 || subtle.ConstantTimeCompare([]byte(state), []byte(cookie)) != 1 {
		w.oidcFail(c, http.StatusBadRequest, "This sign-in did not start in this browser, or it was already used."+again, nil)
		return
	}
	sum := sha256.Sum256([]byte(state))
	login, err := w.oidcStore.TakeOIDCLogin(ctx, sum[:])
	if errors.Is(err, app.ErrNotFound) {
		w.oidcFail(c, http.StatusBadRequest, "This sign-in was already used or has expired."+again, nil)
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	w.setCookie(c, w.oidcStateCookie(), "", -1)
	if time.Since(login.CreatedAt) > oidcLoginTTL {
		w.oidcFail(c, http.StatusBadRequest, "This sign-in has expired."+again, nil)
		return
	}
	if e := c.Query("error"); e != "" {
		w.oidcFail(c, http.StatusForbidden, "The identity provider did not sign you in ("+shorten(e, 100)+").", nil)
		return
	}
	code := c.Query("code")
	if code == "" || len(code) > 4096 {
		w.oidcFail(c, http.StatusBadRequest, "The identity provider's answer has no usable code."+again, nil)
		return
	}
	if err := w.oidc.discover(); err != nil {
		_ = c.Error(providerUnavailable())
		return
	}
	xctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, oidcHTTP), 15*time.Second)
	defer cancel()
	tok, err := w.oidc.oauth.Exchange(xctx, code, oauth2.VerifierOption(login.Verifier))
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re):
		w.oidcFail(c, http.StatusBadRequest, "The identity provider did not accept this sign-in."+again, errors.New(re.ErrorCode))
		return
	case err != nil:
		w.log.Warn("OpenID code exchange failed", "err", err)
		_ = c.Error(providerUnavailable())
		return
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		w.oidcFail(c, http.StatusBadRequest, "The identity provider sent no ID token."+again, nil)
		return
	}
	idt, err := w.oidc.verifier.Verify(xctx, rawID)
	if err != nil {
		w.oidcFail(c, http.StatusBadRequest, "The identity provider's answer could not be verified."+again, err)
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(login.Nonce)) != 1 {
		w.oidcFail(c, http.StatusBadRequest, "The identity provider's answer does not belong to this sign-in."+again, errors.New("nonce mismatch"))
		return
	}
	claims, err := w.oidcClaims(xctx, idt, tok)
	if err != nil {
		w.oidcFail(c, http.StatusBadRequest, "The identity provider's answer could not be read."+again, err)
		return
	}
	if login.LinkUserID != 0 {
		w.oidcLinked(c, login, claims)
		return
	}
	u, err := w.identity.SignInOIDC(ctx, w.oidcStore, claims, w.oidc.cfg.Policy, client(c))
	var refusal *identity.OIDCRefusal
	if errors.As(err, &refusal) {
		w.log.Info("OpenID sign-in refused", "issuer", claims.Issuer, "subject", claims.Subject, "why", refusal.Reason)
		status := http.StatusForbidden
		if errors.Is(err, identity.ErrOIDCAccountExists) {
			status = http.StatusConflict
		}
		w.oidcFail(c, status, refusal.Reason, nil)
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	raw, err := w.sessions.Start(ctx, u, identity.OIDCSignIn{Issuer: claims.Issuer, Subject: claims.Subject, RefreshToken: tok.RefreshToken}, client(c))
	if err != nil {
		_ = c.Error(err)
		return
	}
	w.setCookie(c, w.cookies.session, raw, int(w.cfg.SessionLifetime.Seconds()))
	w.setCookie(c, w.oidcSignedInCookie(), "1", int(w.cfg.SessionLifetime.Seconds()))
	c.Redirect(http.StatusSeeOther, localPath(login.Next))
}

// oidcClaims reads the verified token's claims; what it lacks of the e-mail, name
// and groups is asked of the userinfo endpoint (for the same subject).
func (w *Web) oidcClaims(ctx context.Context, idt *oidc.IDToken, tok *oauth2.Token) (identity.OIDCClaims, error) {
	return w.oidc.claims(ctx, idt, tok)
}

// claims reads a verified ID token's claims, asking userinfo for what it lacks.
func (o *oidcClient) claims(ctx context.Context, idt *oidc.IDToken, tok *oauth2.Token) (identity.OIDCClaims, error) {
	var all map[string]json.RawMessage
	if err := idt.Claims(&all); err != nil {
		return identity.OIDCClaims{}, err
	}
	c := claimReader{groupsClaim: o.cfg.GroupsClaim, OIDCClaims: identity.OIDCClaims{Issuer: idt.Issuer, Subject: idt.Subject}}
	c.read(all)
	if c.Email == "" || !c.verifiedSaid || c.Groups == nil {
		if info, err := o.provider.UserInfo(ctx, oauth2.StaticTokenSource(tok)); err == nil && info.Subject == c.Subject {
			var m map[string]json.RawMessage
			if info.Claims(&m) == nil {
				c.read(m)
			}
		}
	}
	return c.OIDCClaims, nil
}

// claimReader gathers the claims shipfile uses from the ID token and then, for what
// it lacks, from userinfo: the first source that says a thing wins.
type claimReader struct {
	identity.OIDCClaims
	groupsClaim  string
	verifiedSaid bool
}

func (c *claimReader) read(m map[string]json.RawMessage) {
	if c.Email == "" {
		_ = json.Unmarshal(m["email"], &c.Email)
	}
	// email_verified speaks of the address beside it, and of no other.
	var email string
	_ = json.Unmarshal(m["email"], &email)
	if v, ok := m["email_verified"]; ok && !c.verifiedSaid && email != "" && strings.EqualFold(email, c.Email) {
		c.EmailVerified, c.verifiedSaid = claimBool(v), true
	}
	if c.Name == "" {
		_ = json.Unmarshal(m["name"], &c.Name)
	}
	if c.Groups == nil {
		c.Groups = claimStrings(m[c.groupsClaim])
	}
}

// claimBool reads a boolean claim; some providers send "true" as a string.
func claimBool(raw json.RawMessage) bool {
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && strings.EqualFold(s, "true")
}

// claimStrings reads a groups claim: a list of strings, or one string.
func claimStrings(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list
	}
	var one string
	if json.Unmarshal(raw, &one) == nil && one != "" {
		return []string{one}
	}
	return []string{}
}

// oidcSignOutURL is where signing out sends a browser that signed in through the
// provider, when the provider has an end_session_endpoint: there, with the way back
// to the sign-in page. "" otherwise.
func (w *Web) oidcSignOutURL(c *gin.Context) string {
	if w.oidc == nil {
		return ""
	}
	if v, err := c.Cookie(w.oidcSignedInCookie()); err != nil || v == "" {
		return ""
	}
	w.setCookie(c, w.oidcSignedInCookie(), "", -1)
	if w.oidc.discover() != nil || w.oidc.endSession == "" {
		return ""
	}
	u, err := url.Parse(w.oidc.endSession)
	if err != nil {
		return ""
	}
	q := u.Query()
	q.Set("client_id", w.oidc.cfg.ClientID)
	q.Set("post_logout_redirect_uri", w.oidc.cfg.PublicURL+"/login?msg=signed-out")
	u.RawQuery = q.Encode()
	return u.String()
}

// loginOptions is what the sign-in page offers.
type loginOptions struct {
	Password bool
	OIDC     bool
	OIDCName string
	Next     string
}

func (w *Web) loginOptions(next string) loginOptions {
	o := loginOptions{Password: !w.cfg.NoPasswordLogin, Next: next}
	if w.oidc != nil {
		o.OIDC, o.OIDCName = true, w.oidc.cfg.Name
	}
	return o
}

// passwordLogin refuses sign-in by password when SHIPFILE_PASSWORD_LOGIN=false.
func (w *Web) passwordLogin(c *gin.Context) {
	if w.cfg.NoPasswordLogin {
		_ = c.Error(app.Forbidden("sign-in by password is turned off here; sign in through your organization's identity provider"))
		c.Abort()
		return
	}
	c.Next()
}

// oidcFormAction lets the sign-out form's redirect reach the provider's
// end_session_endpoint: browsers hold a form's whole redirect chain to the page's
// form-action, which is otherwise 'self' alone.
func (w *Web) oidcFormAction(c *gin.Context) {
	if w.oidc != nil {
		h := c.Writer.Header()
		if csp := h.Get("Content-Security-Policy"); strings.Contains(csp, "form-action 'self'") {
			h.Set("Content-Security-Policy", strings.Replace(csp, "form-action 'self'", "form-action 'self' "+w.oidc.origins(), 1))
		}
	}
	c.Next()
}

// origins are the provider's origins a browser is sent to: the issuer's and, once
// discovered, the end_session_endpoint's.
func (o *oidcClient) origins() string {
	out := []string{origin(o.cfg.Issuer)}
	o.mu.Lock()
	end := o.endSession
	o.mu.Unlock()
	if e := origin(end); e != "" && e != out[0] {
		out = append(out, e)
	}
	return strings.Join(out, " ")
}

// origin is scheme://host of a URL, "" when it has none.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" || strings.ContainsAny(u.Host, " ;,'") {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// oidcRate bounds the sign-ins one client IP starts (each stores a row for ten
// minutes) and the callbacks it sends, with the per-IP limit of the link routes
// (SHIPFILE_LINK_RATE, counted together with them, across instances).
func (w *Web) oidcRate(c *gin.Context) {
	if err := w.linkRate.Take(c.Request.Context(), c.ClientIP()); err != nil {
		var e *app.Error
		if errors.As(err, &e) && e.Kind == app.KindTooMany {
			err = app.TooMany(e.RetryAfter, "too many sign-ins from this address; retry later")
		}
		_ = c.Error(err)
		c.Abort()
		return
	}
	c.Next()
}
