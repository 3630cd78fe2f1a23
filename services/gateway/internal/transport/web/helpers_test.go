package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
	"github.com/shipfile/shipfile/services/gateway/internal/app/previews"
	"github.com/shipfile/shipfile/services/gateway/internal/service"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/httpapi"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// env is a gateway (API and web UI) on its own database and bucket.
type env struct {
	t        *testing.T
	url      string
	pool     *pgxpool.Pool
	identity *identity.Identity
	packages *packages.Packages
	hasher   *app.Hasher
	sessions *identity.Sessions
	previews *previews.Maker
	objects  *storage.Store
}

type options struct {
	secure      bool
	maxFailures int
	hasher      *app.Hasher
	// edge bounds what one client can hold (rates, body limits); zero: no limits.
	edge service.EdgeConfig
	// trustedProxies are the CIDRs whose X-Forwarded-For names the client.
	trustedProxies []string
	// scanMode is SHIPFILE_SCAN ("": off).
	scanMode app.ScanMode
}

func newEnv(t *testing.T, opts ...func(*options)) *env {
	t.Helper()
	o := options{maxFailures: 5}
	for _, f := range opts {
		f(&o)
	}
	dbURL := pgtest.New(t, migrations.Version(), migrations.Up)
	ctx := context.Background()
	pool, err := database.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if o.hasher == nil {
		o.hasher = app.NewHasher(0, 0)
	}
	cookies := "false"
	if o.secure {
		cookies = "true"
	}
	objects := servicetest.Bucket(t)
	// Built as the gateway's main builds it (service.New), without an outbox relay.
	svc, err := service.New(ctx, service.Config{
		PublicURL:      "http://shipfile.test",
		MaxFileSize:    1 << 20,
		MaxFiles:       5,
		UploadPartSize: 5 << 20,
		ResumeWindow:   time.Hour,
		UploadLease:    30 * time.Second,
		WebhookPrivate: true,
		Web: service.WebConfig{
			SessionLifetime: time.Hour, SessionIdle: time.Hour, CookieSecure: cookies,
			LoginFailures: o.maxFailures, LoginLockout: time.Minute,
		},
		Edge: o.edge,
		Scan: service.ScanConfig{Mode: string(o.scanMode)},
	}, service.Deps{
		Pool: pool, Objects: objects, Registry: ops.NewRegistry(), Secrets: servicetest.Keyring(t), Hasher: o.hasher,
		API: &httpapi.Config{MaxJSONBytes: 1 << 20, MaxFileSize: 1 << 20, RatePerSecond: 1000, RateBurst: 1000, TrustedProxies: o.trustedProxies},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Start(context.Background())) // before pool.Close
	identity, packages, engine := svc.Identity, svc.Packages, svc.Handler
	srv := httptest.NewServer(engine)
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, pool: pool, identity: identity, packages: packages, hasher: o.hasher, sessions: svc.Sessions,
		previews: svc.Previews, objects: objects}
}

func secure(o *options) { o.secure = true }

// user creates a user with a password.
func (e *env) user(email string, role app.Role) app.User {
	e.t.Helper()
	u, err := e.identity.CreateUser(context.Background(), app.NewUser{Email: email, Name: "Test " + string(role), Role: role, Password: "correct horse battery"})
	if err != nil {
		e.t.Fatal(err)
	}
	return u
}

// signedIn creates a regular user and a browser signed in as that user.
func (e *env) signedIn(email string) (app.User, *browser) {
	e.t.Helper()
	u := e.user(email, app.RoleRegular)
	b := e.browser()
	b.login(email)
	return u, b
}

// sent creates a package of owner's, finalizes it and returns the package and the
// token of its link.
func (e *env) sent(owner app.User, np packages.NewPackage) (app.Package, string) {
	e.t.Helper()
	ctx := context.Background()
	p, err := e.packages.Create(ctx, owner, app.Client{}, np)
	if err != nil {
		e.t.Fatal(err)
	}
	_, links, err := e.packages.Finalize(ctx, owner, app.Client{}, p.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	link := links[0].MagicLink
	return p, link[strings.LastIndex(link, "/")+1:]
}

func (e *env) count(table string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// browser is an HTTP client with a cookie jar that does not follow redirects, so
// tests see them.
type browser struct {
	t      *testing.T
	e      *env
	client *http.Client
	csrf   string // the token of the last page that had a form
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: e.t, e: e, client: &http.Client{
		Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type page struct {
	status int
	header http.Header
	body   string
}

var csrfInput = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	p := page{status: resp.StatusCode, header: resp.Header, body: string(body)}
	if m := csrfInput.FindStringSubmatch(p.body); m != nil {
		b.csrf = m[1]
	}
	return p
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, _ := http.NewRequest("GET", b.e.url+path, nil)
	return b.do(req)
}

// post sends a form with the CSRF token of the last page (unless the form has one).
func (b *browser) post(path string, form url.Values, headers ...string) page {
	b.t.Helper()
	if _, ok := form["_csrf"]; !ok {
		form.Set("_csrf", b.csrf)
	}
	req, _ := http.NewRequest("POST", b.e.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return b.do(req)
}

func (b *browser) login(email string) {
	b.t.Helper()
	b.get("/login")
	p := b.post("/login", url.Values{"email": {email}, "password": {"correct horse battery"}})
	if p.status != http.StatusSeeOther {
		b.t.Fatalf("login %s: %d %s", email, p.status, p.body)
	}
}

func (b *browser) cookie(name string) *http.Cookie {
	u, _ := url.Parse(b.e.url)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func expectStatus(t *testing.T, p page, want int) {
	t.Helper()
	if p.status != want {
		t.Fatalf("status = %d, want %d; body:\n%.2000s", p.status, want, p.body)
	}
}

func expectRedirect(t *testing.T, p page, to string) {
	t.Helper()
	if p.status != http.StatusSeeOther || p.header.Get("Location") != to {
		t.Fatalf("answer = %d to %q, want 303 to %q; body:\n%.1000s", p.status, p.header.Get("Location"), to, p.body)
	}
}

// fieldError returns the error shown beside the named field, "" when none.
func fieldError(p page, field string) string {
	m := regexp.MustCompile(`<p class="field-error" id="` + regexp.QuoteMeta(field) + `-error">([^<]*)</p>`).FindStringSubmatch(p.body)
	if m == nil {
		return ""
	}
	return m[1]
}
