package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"errors"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is one account of the provider.
type User struct {
	Username      string   `json:"username"`
	Password      string   `json:"password,omitempty"`
	Email         string   `json:"email"`
	EmailVerified bool     `json:"email_verified"`
	Name          string   `json:"name"`
	Groups        []string `json:"groups"`
	Disabled      bool     `json:"disabled"`
	// Subject is the stable `sub` claim; the username when empty.
	Subject string `json:"sub,omitempty"`
}

// public is the user as the admin API shows it: without the password.
func (u User) public() User {
	u.Password = ""
	return u
}

func (u User) sub() string {
	if u.Subject != "" {
		return u.Subject
	}
	return u.Username
}

// storage is the provider's in-memory state: users, the one client, pending
// authorization requests, codes, access tokens and the signing keys. It implements
// op.Storage; everything the protocol does with it (PKCE, codes, signing, discovery,
// the key set) is the library's.
type storage struct {
	mu       sync.Mutex
	users    map[string]User // by username
	client   *client
	requests map[string]*authRequest
	codes    map[string]string // code → request id
	tokens   map[string]accessToken
	refresh  map[string]*refreshGrant // refresh token → what it grants
	keys     []*signingKey            // newest last; the last signs
	keep     int                      // keys published after a rotation
}

type accessToken struct {
	subject, clientID string
	scopes            []string
	expires           time.Time
}

// refreshGrant is what a refresh token stands for: the sign-in it came from. It
// implements op.RefreshTokenRequest; each use rotates the token.
type refreshGrant struct {
	subject, clientID string
	scopes            []string
	amr               []string
	authTime          time.Time
}

func (g *refreshGrant) GetAMR() []string                 { return g.amr }
func (g *refreshGrant) GetAudience() []string            { return []string{g.clientID} }
func (g *refreshGrant) GetAuthTime() time.Time           { return g.authTime }
func (g *refreshGrant) GetClientID() string              { return g.clientID }
func (g *refreshGrant) GetScopes() []string              { return g.scopes }
func (g *refreshGrant) GetSubject() string               { return g.subject }
func (g *refreshGrant) SetCurrentScopes(scopes []string) { g.scopes = scopes }

func newStorage(c *client, users []User) (*storage, error) {
	s := &storage{users: map[string]User{}, client: c, requests: map[string]*authRequest{},
		codes: map[string]string{}, tokens: map[string]accessToken{}, refresh: map[string]*refreshGrant{}, keep: 2}
	for _, u := range users {
		s.users[u.Username] = u
	}
	if _, err := s.rotate(); err != nil {
		return nil, err
	}
	return s, nil
}

// rotate makes a new signing key, which signs from now on; the previous one stays in
// the key set (tokens it signed still verify), older ones are dropped.
func (s *storage) rotate() (string, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	sk := &signingKey{id: rand.Text()[:16], key: k}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, sk)
	if len(s.keys) > s.keep {
		s.keys = s.keys[len(s.keys)-s.keep:]
	}
	return sk.id, nil
}

func (s *storage) putUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.Username] = u
}

// listUsers returns the users without their passwords.
func (s *storage) listUsers() []User {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]User, 0, len(s.users))
	for _, u := range s.users {
		out = append(out, u.public())
	}
	slices.SortFunc(out, func(a, b User) int {
		if a.Username < b.Username {
			return -1
		}
		return 1
	})
	return out
}

func (s *storage) userBySubject(sub string) (User, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.users {
		if u.sub() == sub {
			return u, true
		}
	}
	return User{}, false
}

var errLogin = errors.New("wrong username or password")
var errDisabled = errors.New("this account is disabled")

// checkPassword returns the user when the password is right and the account enabled.
func (s *storage) checkPassword(username, password string) (User, error) {
	s.mu.Lock()
	u, ok := s.users[username]
	s.mu.Unlock()
	if !ok || subtle.ConstantTimeCompare([]byte(u.Password), []byte(password)) != 1 {
		return User{}, errLogin
	}
	if u.Disabled {
		return User{}, errDisabled
	}
	return u, nil
}

// complete marks an authorization request done for the user.
func (s *storage) complete(id string, u User) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok {
		return errors.New("sign-in request not found or expired")
	}
	r.subject, r.done, r.authTime = u.sub(), true, time.Now()
	return nil
}

func (s *storage) request(id string) (*authRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	return r, ok
}

// ---- op.AuthStorage

func (s *storage) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	if slices.Contains(r.Prompt, oidc.PromptNone) {
		return nil, oidc.ErrLoginRequired()
	}
	// PKCE is required, with S256 (as OAuth 2.1 and providers' "PKCE required"
	// settings do): a client that sends no challenge is sent back an error.
	if r.CodeChallenge == "" || r.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE with code_challenge_method=S256 is required")
	}
	req := &authRequest{
		id: rand.Text(), created: time.Now(), clientID: r.ClientID, redirectURI: r.RedirectURI, state: r.State,
		nonce: r.Nonce, scopes: r.Scopes, responseType: r.ResponseType, responseMode: r.ResponseMode,
		subject: userID, prompt: r.Prompt,
	}
	if r.CodeChallenge != "" {
		req.challenge = &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Requests nobody finished within 10 minutes are dropped.
	for id, old := range s.requests {
		if time.Since(old.created) > 10*time.Minute {
			delete(s.requests, id)
		}
	}
	s.requests[req.id] = req
	return req, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	r, ok := s.request(id)
	if !ok {
		return nil, errors.New("request not found")
	}
	return r, nil
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("code invalid or already used")
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

// DeleteAuthRequest is called once the code was exchanged: the code cannot be used
// again.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, r op.TokenRequest) (string, time.Time, error) {
	id := rand.Text()
	exp := time.Now().Add(5 * time.Minute)
	clientID := ""
	if ar, ok := r.(*authRequest); ok {
		clientID = ar.clientID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t := range s.tokens {
		if time.Now().After(t.expires) {
			delete(s.tokens, k)
		}
	}
	s.tokens[id] = accessToken{subject: r.GetSubject(), clientID: clientID, scopes: r.GetScopes(), expires: exp}
	return id, exp, nil
}

// CreateAccessAndRefreshTokens makes an access token and a refresh token: a new one
// for a sign-in (offline_access asked), the next one for a refresh (the used one
// stops working).
func (s *storage) CreateAccessAndRefreshTokens(ctx context.Context, r op.TokenRequest, current string) (string, string, time.Time, error) {
	id, exp, err := s.CreateAccessToken(ctx, r)
	if err != nil {
		return "", "", time.Time{}, err
	}
	g := &refreshGrant{subject: r.GetSubject(), scopes: r.GetScopes(), amr: []string{"pwd"}, authTime: time.Now()}
	switch req := r.(type) {
	case *authRequest:
		g.clientID, g.authTime = req.clientID, req.authTime
	case *refreshGrant:
		g.clientID, g.amr, g.authTime = req.clientID, req.amr, req.authTime
	}
	next := rand.Text() + rand.Text()
	s.mu.Lock()
	defer s.mu.Unlock()
	if current != "" {
		delete(s.refresh, current)
	}
	s.refresh[next] = g
	return id, next, exp, nil
}

// TokenRequestByRefreshToken returns the grant of a refresh token, while its user
// exists and is not disabled: a disabled account's refresh is refused
// (invalid_grant), as a provider that revoked it would.
func (s *storage) TokenRequestByRefreshToken(_ context.Context, token string) (op.RefreshTokenRequest, error) {
	s.mu.Lock()
	g, ok := s.refresh[token]
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("unknown refresh token")
	}
	u, ok := s.userBySubject(g.subject)
	if !ok || u.Disabled {
		return nil, errors.New("the account is disabled or gone")
	}
	c := *g
	return &c, nil
}

func (s *storage) TerminateSession(_ context.Context, userID, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t := range s.tokens {
		if t.subject == userID && t.clientID == clientID {
			delete(s.tokens, k)
		}
	}
	return nil
}

func (s *storage) RevokeToken(_ context.Context, token, _, _ string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, token)
	delete(s.refresh, token)
	return nil
}

func (s *storage) GetRefreshTokenInfo(_ context.Context, clientID, token string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.refresh[token]
	if !ok || g.clientID != clientID {
		return "", "", op.ErrInvalidRefreshToken
	}
	return g.subject, token, nil
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[len(s.keys)-1], nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]op.Key, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, publicKey{k})
	}
	return out, nil
}

// ---- op.OPStorage

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if id != s.client.id {
		return nil, errors.New("client not found")
	}
	return s.client, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if id != s.client.id || subtle.ConstantTimeCompare([]byte(secret), []byte(s.client.secret)) != 1 {
		return errors.New("invalid client credentials")
	}
	return nil
}

func (s *storage) SetUserinfoFromScopes(_ context.Context, info *oidc.UserInfo, userID, _ string, scopes []string) error {
	return s.setUserinfo(info, userID, scopes)
}

func (s *storage) setUserinfo(info *oidc.UserInfo, subject string, scopes []string) error {
	u, ok := s.userBySubject(subject)
	if !ok {
		return errors.New("user not found")
	}
	info.Subject = u.sub()
	for _, sc := range scopes {
		switch sc {
		case oidc.ScopeEmail:
			info.Email, info.EmailVerified = u.Email, oidc.Bool(u.EmailVerified)
		case oidc.ScopeProfile:
			info.Name, info.PreferredUsername = u.Name, u.Username
		}
	}
	groups := u.Groups
	if groups == nil {
		groups = []string{}
	}
	info.AppendClaims("groups", groups)
	return nil
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, _, _ string) error {
	s.mu.Lock()
	t, ok := s.tokens[tokenID]
	s.mu.Unlock()
	if !ok || time.Now().After(t.expires) {
		return errors.New("token is invalid or has expired")
	}
	return s.setUserinfo(info, t.subject, t.scopes)
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, r *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	s.mu.Lock()
	t, ok := s.tokens[tokenID]
	s.mu.Unlock()
	if !ok || time.Now().After(t.expires) || t.clientID != clientID {
		return errors.New("token is invalid")
	}
	info := new(oidc.UserInfo)
	if err := s.setUserinfo(info, subject, t.scopes); err != nil {
		return err
	}
	r.SetUserInfo(info)
	r.Scope, r.ClientID, r.Expiration = t.scopes, t.clientID, oidc.FromTime(t.expires)
	return nil
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT profile grants are not supported")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("JWT profile grants are not supported")
}

func (s *storage) Health(context.Context) error { return nil }

// ---- keys

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ k *signingKey }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return &p.k.key.PublicKey }

// ---- the authorization request

type authRequest struct {
	id, clientID, redirectURI, state, nonce, subject string
	created, authTime                                time.Time
	scopes                                           []string
	prompt                                           []string
	responseType                                     oidc.ResponseType
	responseMode                                     oidc.ResponseMode
	challenge                                        *oidc.CodeChallenge
	done                                             bool
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return []string{a.clientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

// ---- the client

type client struct {
	id, secret      string
	redirectGlobs   []string
	postLogoutGlobs []string
	idTokenLifetime time.Duration
}

func (c *client) GetID() string                        { return c.id }
func (c *client) RedirectURIs() []string               { return nil }
func (c *client) PostLogoutRedirectURIs() []string     { return nil }
func (c *client) RedirectURIGlobs() []string           { return c.redirectGlobs }
func (c *client) PostLogoutRedirectURIGlobs() []string { return c.postLogoutGlobs }
func (c *client) ApplicationType() op.ApplicationType  { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod          { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (c *client) LoginURL(id string) string            { return "/login?authRequestID=" + id }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration       { return c.idTokenLifetime }
func (c *client) DevMode() bool                        { return true }
func (c *client) IsScopeAllowed(string) bool           { return false }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
