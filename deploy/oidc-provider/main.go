// Command oidc-provider is a small OpenID Connect provider for trying shipfile's
// "Sign in with SSO" on one machine and for its tests: the provider of
// github.com/zitadel/oidc/v3 (op package: discovery, the authorization code flow with
// PKCE, the token, userinfo and end_session endpoints, RS256 ID tokens and the JWKS
// are all the library's), with in-memory users, a login page of its own and a few
// admin endpoints for tests. It is not for production: passwords are kept in clear
// in memory and nothing is persisted. Refresh tokens are issued to a sign-in that
// asks for offline_access, rotate at each use and are refused once their user is
// disabled.
//
// Users come from -users (a JSON file: {"users": [{"username", "password", "email",
// "email_verified", "name", "groups", "disabled", "sub"}]}) or are the two defaults
// printed at start. Admin endpoints, which require Authorization: Bearer with the
// -admin-token flag's value (default: $OIDC_PROVIDER_ADMIN_TOKEN; without one they
// answer 404), never show a password:
//
//	GET  /admin/users             the users
//	PUT  /admin/users/{username}  create or replace a user (JSON body as in -users)
//	POST /admin/rotate-keys       a new signing key signs from now on ({"kid"}); SIGHUP does the same
//
// The browser keeps a sign-in at the provider (a cookie) until end_session, so a
// second authorization request is answered without the login page, as real
// providers do. PKCE (S256) is required: an authorization request without it comes
// back to the client with error=invalid_request.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// defaultUsers are the users when no -users file is given.
var defaultUsers = []User{
	{Username: "alice", Password: "alice-password", Email: "alice@example.com", EmailVerified: true,
		Name: "Alice Admin", Groups: []string{"shipfile-admins", "shipfile-users"}},
	{Username: "bob", Password: "bob-password", Email: "bob@example.com", EmailVerified: true,
		Name: "Bob Regular", Groups: []string{"shipfile-users"}},
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("oidc-provider stopped", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	addr := flag.String("addr", "127.0.0.1:9400", "listen address")
	issuer := flag.String("issuer", "", "issuer URL (default http://<addr>)")
	clientID := flag.String("client-id", "shipfile", "the one client's id")
	clientSecret := flag.String("client-secret", "shipfile-dev-secret", "the one client's secret")
	redirects := flag.String("redirect-uris", "http://127.0.0.1:*/auth/oidc/callback,http://localhost:*/auth/oidc/callback",
		"comma-separated redirect URI patterns (path.Match: * matches within one path segment)")
	postLogout := flag.String("post-logout-uris", "http://127.0.0.1:*/*,http://localhost:*/*", "comma-separated post-logout redirect URI patterns")
	usersFile := flag.String("users", "", "JSON file of users (default: alice and bob)")
	adminToken := flag.String("admin-token", os.Getenv("OIDC_PROVIDER_ADMIN_TOKEN"),
		"bearer token the /admin endpoints require (default $OIDC_PROVIDER_ADMIN_TOKEN; empty: the endpoints are off)")
	lifetime := flag.Duration("id-token-lifetime", 5*time.Minute, "lifetime of ID tokens")
	printUsers := flag.Bool("print-users", false, "print the users and exit")
	flag.Parse()

	users := defaultUsers
	if *usersFile != "" {
		b, err := os.ReadFile(*usersFile)
		if err != nil {
			return err
		}
		var f struct {
			Users []User `json:"users"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("%s: %w", *usersFile, err)
		}
		users = f.Users
	}
	if *printUsers {
		for _, u := range users {
			fmt.Printf("%-10s password %-16s %s  groups %s\n", u.Username, u.Password, u.Email, strings.Join(u.Groups, ","))
		}
		return nil
	}
	if *issuer == "" {
		*issuer = "http://" + *addr
	}
	c := &client{id: *clientID, secret: *clientSecret, redirectGlobs: split(*redirects),
		postLogoutGlobs: split(*postLogout), idTokenLifetime: *lifetime}
	st, err := newStorage(c, users)
	if err != nil {
		return err
	}
	h, err := newHandler(*issuer, st, *adminToken, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			if kid, err := st.rotate(); err == nil {
				log.Info("signing key rotated (SIGHUP)", "kid", kid)
			}
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("OpenID provider listening", "issuer", *issuer, "addr", ln.Addr().String(), "client_id", *clientID)
	for _, u := range st.listUsers() {
		log.Info("user", "username", u.Username, "email", u.Email, "groups", strings.Join(u.Groups, ","))
	}
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func split(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// sessionCookie holds the browser's sign-in at the provider.
const sessionCookie = "oidc_provider_session"

type server struct {
	st         *storage
	adminToken string
	callback   func(context.Context, string) string
	log        *slog.Logger

	mu       sync.Mutex
	sessions map[string]string // sha256(cookie) → username
}

func newHandler(issuer string, st *storage, adminToken string, log *slog.Logger) (http.Handler, error) {
	key := sha256.Sum256([]byte(rand.Text()))
	provider, err := op.NewProvider(&op.Config{
		CryptoKey:                key,
		DefaultLogoutRedirectURI: "/signed-out",
		CodeMethodS256:           true,
		AuthMethodPost:           true,
		GrantTypeRefreshToken:    true,
	}, st, op.StaticIssuer(issuer), op.WithAllowInsecure(), op.WithLogger(log))
	if err != nil {
		return nil, err
	}
	s := &server{st: st, adminToken: adminToken, callback: op.AuthCallbackURL(provider), log: log, sessions: map[string]string{}}
	r := chi.NewRouter()
	interceptor := op.NewIssuerInterceptor(provider.IssuerFromRequest)
	r.Get("/login", interceptor.HandlerFunc(s.loginPage))
	r.Post("/login", interceptor.HandlerFunc(s.loginSubmit))
	r.Get("/signed-out", func(w http.ResponseWriter, _ *http.Request) {
		render(w, http.StatusOK, page{Title: "Signed out", Message: "You are signed out of the provider."})
	})
	r.Route("/admin", func(r chi.Router) {
		r.Use(s.requireAdmin)
		r.Get("/users", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, st.listUsers()) })
		r.Put("/users/{username}", s.putUser)
		r.Post("/rotate-keys", func(w http.ResponseWriter, _ *http.Request) {
			kid, err := st.rotate()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			log.Info("signing key rotated", "kid", kid)
			writeJSON(w, http.StatusOK, map[string]string{"kid": kid})
		})
	})
	// end_session also ends the browser's sign-in here.
	endSession := provider.EndSessionEndpoint().Relative()
	r.Mount("/", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == endSession {
			s.endBrowserSession(w, req)
		}
		provider.ServeHTTP(w, req)
	}))
	return r, nil
}

func (s *server) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.adminToken == "" {
			http.Error(w, "the admin API is off: start the provider with -admin-token", http.StatusNotFound)
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+s.adminToken)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "admin token required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *server) putUser(w http.ResponseWriter, r *http.Request) {
	var u User
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&u); err != nil {
		http.Error(w, "bad JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	u.Username = chi.URLParam(r, "username")
	if u.Username == "" || u.Password == "" {
		http.Error(w, "username and password are required", http.StatusBadRequest)
		return
	}
	s.st.putUser(u)
	writeJSON(w, http.StatusOK, u.public())
}

func (s *server) browserUser(r *http.Request) (User, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return User{}, false
	}
	sum := sha256.Sum256([]byte(c.Value))
	s.mu.Lock()
	name, ok := s.sessions[string(sum[:])]
	s.mu.Unlock()
	if !ok {
		return User{}, false
	}
	s.st.mu.Lock()
	u, ok := s.st.users[name]
	s.st.mu.Unlock()
	if !ok || u.Disabled {
		return User{}, false
	}
	return u, true
}

func (s *server) endBrowserSession(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		sum := sha256.Sum256([]byte(c.Value))
		s.mu.Lock()
		delete(s.sessions, string(sum[:]))
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

func (s *server) loginPage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("authRequestID")
	req, ok := s.st.request(id)
	if !ok {
		render(w, http.StatusBadRequest, page{Title: "Sign-in request not found", Message: "Start the sign-in again from the application."})
		return
	}
	// A browser still signed in here is not asked again (unless prompt=login).
	if u, ok := s.browserUser(r); ok && !containsPrompt(req.prompt, oidc.PromptLogin) {
		if err := s.st.complete(id, u); err == nil {
			http.Redirect(w, r, s.callback(r.Context(), id), http.StatusFound)
			return
		}
	}
	render(w, http.StatusOK, page{Title: "Sign in to the test provider", ID: id})
}

func containsPrompt(p []string, want string) bool {
	for _, v := range p {
		if v == want {
			return true
		}
	}
	return false
}

func (s *server) loginSubmit(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	id, username := r.PostFormValue("id"), r.PostFormValue("username")
	u, err := s.st.checkPassword(username, r.PostFormValue("password"))
	if err != nil {
		status := http.StatusUnauthorized
		if errors.Is(err, errDisabled) {
			status = http.StatusForbidden
		}
		s.log.Info("sign-in refused", "username", username, "why", err.Error())
		render(w, status, page{Title: "Sign in to the test provider", ID: id, Username: username, Error: err.Error()})
		return
	}
	if err := s.st.complete(id, u); err != nil {
		render(w, http.StatusBadRequest, page{Title: "Sign-in request not found", Message: err.Error()})
		return
	}
	raw := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(raw))
	s.mu.Lock()
	s.sessions[string(sum[:])] = u.Username
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: raw, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	s.log.Info("signed in", "username", u.Username)
	http.Redirect(w, r, s.callback(r.Context(), id), http.StatusFound)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type page struct {
	Title, Message, ID, Username, Error string
}

var tmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>body{font-family:sans-serif;max-width:26rem;margin:4rem auto}label{display:block;margin:.6rem 0}
input{width:100%;padding:.4rem}.error{color:#a00}</style></head>
<body><h1>{{.Title}}</h1>
{{if .Message}}<p>{{.Message}}</p>{{end}}
{{if .ID}}
{{if .Error}}<p class="error" id="provider-error">{{.Error}}</p>{{end}}
<form method="post" action="/login" id="provider-login">
<input type="hidden" name="id" value="{{.ID}}">
<label>Username <input name="username" id="username" value="{{.Username}}" autocomplete="username" required></label>
<label>Password <input name="password" id="password" type="password" autocomplete="current-password" required></label>
<button type="submit" id="provider-submit">Sign in</button>
</form>
{{end}}
</body></html>`))

func render(w http.ResponseWriter, status int, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = tmpl.Execute(w, p)
}
