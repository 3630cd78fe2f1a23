package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

func TestSetup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	expectRedirect(t, b.get("/"), "/setup")
	expectRedirect(t, b.get("/login"), "/setup")
	p := b.get("/setup")
	expectStatus(t, p, http.StatusOK)

	// A post without the CSRF token, or from another site, creates nothing.
	expectStatus(t, b.post("/setup", url.Values{"_csrf": {"forged"}, "email": {"a@example.com"}, "name": {"A"},
		"password": {"long-enough-pw"}, "password_again": {"long-enough-pw"}}), http.StatusForbidden)
	expectStatus(t, b.post("/setup", url.Values{"email": {"a@example.com"}, "name": {"A"},
		"password": {"long-enough-pw"}, "password_again": {"long-enough-pw"}}, "Sec-Fetch-Site", "cross-site"), http.StatusForbidden)
	other := e.browser()
	expectStatus(t, other.post("/setup", url.Values{"_csrf": {b.csrf}, "email": {"a@example.com"}, "name": {"A"},
		"password": {"long-enough-pw"}, "password_again": {"long-enough-pw"}}), http.StatusForbidden)

	// Bad input: the form comes back with the error beside the field and the input kept.
	cases := []struct {
		name, field string
		form        url.Values
	}{
		{"bad e-mail", "email", url.Values{"email": {"not-an-address"}, "name": {"A"}, "password": {"long-enough-pw"}, "password_again": {"long-enough-pw"}}},
		{"no name", "name", url.Values{"email": {"a@example.com"}, "name": {""}, "password": {"long-enough-pw"}, "password_again": {"long-enough-pw"}}},
		{"short password", "password", url.Values{"email": {"a@example.com"}, "name": {"A"}, "password": {"short"}, "password_again": {"short"}}},
		{"passwords differ", "password_again", url.Values{"email": {"a@example.com"}, "name": {"A"}, "password": {"long-enough-pw"}, "password_again": {"other-long-pw"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := b.post("/setup", tc.form)
			expectStatus(t, p, http.StatusUnprocessableEntity)
			if fieldError(p, tc.field) == "" {
				t.Fatalf("no error beside %s:\n%s", tc.field, p.body)
			}
			if !strings.Contains(p.body, `id="`+tc.field+`"`) || !strings.Contains(p.body, `aria-describedby="`+tc.field+`-error"`) {
				t.Fatalf("the %s input does not point at its error", tc.field)
			}
			if tc.form.Get("email") != "" && !strings.Contains(p.body, `value="`+tc.form.Get("email")+`"`) {
				t.Fatal("the e-mail address was not kept")
			}
			if n := e.count("users"); n != 0 {
				t.Fatalf("%d users created by a bad form", n)
			}
		})
	}

	p = b.post("/setup", url.Values{"email": {"first@example.com"}, "name": {"First"}, "password": {"long-enough-pw"}, "password_again": {"long-enough-pw"}})
	expectRedirect(t, p, "/login?msg=admin-created")
	u, err := e.identity.CheckPassword(context.Background(), "first@example.com", "long-enough-pw")
	if err != nil || u.Role != app.RoleAdmin {
		t.Fatalf("first admin: %+v %v", u, err)
	}
	// The page is gone, for GET and POST alike, with an HTML 404.
	p = b.get("/setup")
	if p.status != http.StatusNotFound || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") {
		t.Fatalf("setup after the first user: %d %s", p.status, p.header.Get("Content-Type"))
	}
	b.get("/login")
	expectStatus(t, b.post("/setup", url.Values{"email": {"second@example.com"}, "name": {"Second"},
		"password": {"long-enough-pw"}, "password_again": {"long-enough-pw"}}), http.StatusNotFound)
	if n := e.count("users"); n != 1 {
		t.Fatalf("users = %d", n)
	}
}

func TestLoginSessionLogout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ann@example.com", app.RoleRegular)
	b := e.browser()
	expectRedirect(t, b.get("/account"), "/login?next=%2Faccount")
	b.get("/login?next=/account")

	p := b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"wrong password!"}, "next": {"/account"}})
	expectStatus(t, p, http.StatusUnauthorized)
	if !strings.Contains(p.body, "Wrong e-mail address or password") || !strings.Contains(p.body, `value="ann@example.com"`) {
		t.Fatalf("failed sign-in page:\n%s", p.body)
	}
	p = b.post("/login", url.Values{"email": {""}, "password": {""}})
	expectStatus(t, p, http.StatusUnprocessableEntity)
	if fieldError(p, "email") == "" || fieldError(p, "password") == "" {
		t.Fatalf("empty sign-in form: no field errors:\n%s", p.body)
	}
	// An open redirect is refused: next must be a path here.
	p = b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"correct horse battery"}, "next": {"//evil.example/x"}})
	expectRedirect(t, p, "/")

	c := b.cookie("shipfile_session")
	if c == nil || len(c.Value) != 43 {
		t.Fatalf("session cookie = %+v", c)
	}
	if n := e.count("web_sessions"); n != 1 {
		t.Fatalf("sessions = %d", n)
	}
	var stored []byte
	if err := e.pool.QueryRow(context.Background(), "SELECT id_hash FROM web_sessions").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stored, []byte(c.Value)) {
		t.Fatal("the raw session id is stored")
	}
	p = b.get("/account")
	expectStatus(t, p, http.StatusOK)
	if !strings.Contains(p.body, "ann@example.com") || p.header.Get("Cache-Control") != "private, no-store" {
		t.Fatalf("account page: %v", p.header)
	}
	// Signed in, the sign-in page sends the user on.
	expectRedirect(t, b.get("/login"), "/")
	// A session past its end is refused, and its cookie cleared.
	other := e.browser()
	other.login("ann@example.com")
	if _, err := e.pool.Exec(context.Background(), "UPDATE web_sessions SET expires_at = now() - interval '1 second' WHERE id_hash <> $1", stored); err != nil {
		t.Fatal(err)
	}
	expectRedirect(t, other.get("/account"), "/login?next=%2Faccount")
	if c := other.cookie("shipfile_session"); c != nil {
		t.Fatalf("the ended session's cookie is kept: %+v", c)
	}
	if _, err := e.pool.Exec(context.Background(), "DELETE FROM web_sessions WHERE id_hash <> $1", stored); err != nil {
		t.Fatal(err)
	}

	// Logout needs the CSRF token too, then ends the session on the server.
	expectStatus(t, b.post("/logout", url.Values{"_csrf": {"nope"}}), http.StatusForbidden)
	stolen := c.Value
	expectRedirect(t, b.post("/logout", url.Values{}), "/login?msg=signed-out")
	if n := e.count("web_sessions"); n != 0 {
		t.Fatalf("sessions after logout = %d", n)
	}
	expectRedirect(t, b.get("/account"), "/login?next=%2Faccount")
	replay := e.browser()
	u, _ := url.Parse(e.url)
	replay.client.Jar.SetCookies(u, []*http.Cookie{{Name: "shipfile_session", Value: stolen}})
	expectRedirect(t, replay.get("/account"), "/login?next=%2Faccount")
}

func TestCookieAttributes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		secure  bool
		session string
	}{
		{"plain HTTP", false, "shipfile_session"},
		{"behind TLS", true, "__Host-shipfile_session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var e *env
			if tc.secure {
				e = newEnv(t, secure)
			} else {
				e = newEnv(t)
			}
			e.user("ann@example.com", app.RoleRegular)
			b := e.browser()
			p := b.get("/login")
			csrf := b.csrf
			// The jar does not send Secure cookies over plain HTTP: carry the CSRF
			// cookie by hand.
			var csrfCookie string
			for _, sc := range p.header.Values("Set-Cookie") {
				if strings.Contains(sc, "shipfile_csrf=") {
					csrfCookie = strings.SplitN(sc, ";", 2)[0]
				}
			}
			form := url.Values{"_csrf": {csrf}, "email": {"ann@example.com"}, "password": {"correct horse battery"}}
			req, _ := http.NewRequest("POST", e.url+"/login", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Cookie", csrfCookie)
			p = b.do(req)
			expectRedirect(t, p, "/")
			var set string
			for _, sc := range p.header.Values("Set-Cookie") {
				if strings.HasPrefix(sc, tc.session+"=") {
					set = sc
				}
			}
			for _, want := range []string{"HttpOnly", "SameSite=Lax", "Path=/"} {
				if !strings.Contains(set, want) {
					t.Errorf("session cookie %q lacks %s", set, want)
				}
			}
			if strings.Contains(set, "Secure") != tc.secure || strings.Contains(set, "Domain=") {
				t.Errorf("session cookie %q: Secure should be %v, no Domain", set, tc.secure)
			}
		})
	}
}

func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.maxFailures = 3 })
	e.user("ann@example.com", app.RoleRegular)
	e.user("bob@example.com", app.RoleRegular)
	b := e.browser()
	b.get("/login")
	for i := range 3 {
		p := b.post("/login", url.Values{"email": {"ANN@example.com"}, "password": {fmt.Sprintf("guess number %d", i)}})
		expectStatus(t, p, http.StatusUnauthorized)
	}
	// Locked: even the right password is not checked, and the answer says to wait.
	p := b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"correct horse battery"}})
	expectStatus(t, p, http.StatusTooManyRequests)
	if p.header.Get("Retry-After") == "" || !strings.Contains(p.body, "Too many failed sign-ins") {
		t.Fatalf("throttled answer: %v\n%s", p.header, p.body)
	}
	if n := e.count("web_sessions"); n != 0 {
		t.Fatalf("a locked sign-in opened a session")
	}
	// The same IP address is locked for other accounts too (3 failures from it).
	expectStatus(t, b.post("/login", url.Values{"email": {"bob@example.com"}, "password": {"correct horse battery"}}), http.StatusTooManyRequests)
	// Once the lock has passed, the right password works and clears the count.
	if _, err := e.pool.Exec(context.Background(), "UPDATE login_throttle SET locked_until = now() - interval '1 second', window_start = now() - interval '1 hour'"); err != nil {
		t.Fatal(err)
	}
	b.login("ann@example.com")
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM login_throttle WHERE key = 'email:ann@example.com'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the address's failures were not cleared: %d %v", n, err)
	}
	// Counts whose window and lock are over are swept.
	if n := e.count("login_throttle"); n != 0 {
		t.Fatalf("%d stale throttle rows left", n)
	}
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ann@example.com", app.RoleRegular)
	b := e.browser()
	b.login("ann@example.com")
	for _, path := range []string{"/", "/send", "/account", "/login", "/no/such/page", "/api/v1/me"} {
		p := b.get(path)
		csp := p.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		if p.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
		if strings.HasPrefix(p.header.Get("Content-Type"), "text/html") && strings.Contains(p.body, "<script>") {
			t.Errorf("%s has an inline script", path)
		}
	}
	// The script and stylesheet come from here.
	p := b.get("/")
	for _, m := range regexp.MustCompile(`(?:src|href)="(/static/ui/[^"]+)"`).FindAllStringSubmatch(p.body, -1) {
		a := b.get(strings.ReplaceAll(m[1], "&amp;", "&"))
		if a.status != http.StatusOK || len(a.body) < 100 || !strings.Contains(a.header.Get("Cache-Control"), "immutable") {
			t.Errorf("asset %s: %d, %d bytes, %s", m[1], a.status, len(a.body), a.header.Get("Cache-Control"))
		}
	}
	if a := b.get("/static/ui/../templates/layout.html"); a.status != http.StatusNotFound {
		t.Errorf("static path escape: %d", a.status)
	}
}

func TestSendFormErrorsCreateNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ann@example.com", app.RoleRegular)
	b := e.browser()
	b.login("ann@example.com")
	good := func() url.Values {
		return url.Values{"recipient_email": {"bob@example.com"}, "recipient_name": {"Bob"}, "title": {"Q3 report"}, "note": {"Hi Bob"}, "ttl_days": {"7"}}
	}
	cases := []struct {
		name, field, key, value string
	}{
		{"bad address", "recipient_email", "recipient_email", "bob@"},
		{"no title", "title", "title", "  "},
		{"ttl too long", "ttl_days", "ttl_days", "91"},
		{"ttl zero", "ttl_days", "ttl_days", "0"},
		{"ttl not a number", "ttl_days", "ttl_days", "a week"},
		{"note too long", "note", "note", strings.Repeat("x", 2001)},
	}
	for _, path := range []string{"/send", "/request"} {
		for _, tc := range cases {
			t.Run(path+" "+tc.name, func(t *testing.T) {
				b.get(path)
				f := good()
				f.Set(tc.key, tc.value)
				p := b.post(path, f)
				expectStatus(t, p, http.StatusUnprocessableEntity)
				if msg := fieldError(p, tc.field); msg == "" {
					t.Fatalf("no error beside %s:\n%s", tc.field, p.body)
				}
				for k, v := range f {
					if k != tc.key && k != "_csrf" && !strings.Contains(p.body, v[0]) {
						t.Errorf("the form lost %s", k)
					}
				}
				if n := e.count("packages"); n != 0 {
					t.Fatalf("a bad form created %d packages", n)
				}
			})
		}
	}
	b.get("/send")
	p := b.post("/send", good())
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/packages/") {
		t.Fatalf("send: %d %s", p.status, p.header.Get("Location"))
	}
	if n := e.count("packages"); n != 1 {
		t.Fatalf("packages = %d", n)
	}
}

// TestUploadThroughSession: the page's script calls the REST API with the session
// cookie. Safe methods need nothing more; unsafe ones need the CSRF header and the
// same origin.
func TestUploadThroughSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ann@example.com", app.RoleRegular)
	b := e.browser()
	b.login("ann@example.com")
	b.get("/send")
	p := b.post("/send", url.Values{"recipient_email": {"bob@example.com"}, "title": {"Report"}, "ttl_days": {"3"}})
	pkgPath := p.header.Get("Location")
	draft := b.get(pkgPath)
	expectStatus(t, draft, http.StatusOK)
	meta := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindStringSubmatch(draft.body)
	zone := regexp.MustCompile(`data-upload-url="([^"]+)"`).FindStringSubmatch(draft.body)
	if meta == nil || zone == nil {
		t.Fatalf("the draft page has no CSRF meta or upload zone:\n%s", draft.body)
	}
	upload := func(headers ...string) page {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		w, _ := mw.CreateFormFile("file", "hello.txt")
		w.Write([]byte("hello, world"))
		mw.Close()
		req, _ := http.NewRequest("POST", e.url+zone[1], &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		return b.do(req)
	}
	// The token with its first character changed: a random token may begin with any.
	wrong := "x" + meta[1][1:]
	if meta[1][0] == 'x' {
		wrong = "y" + meta[1][1:]
	}
	for _, tc := range []struct {
		name    string
		headers []string
	}{
		{"no CSRF header", nil},
		{"wrong CSRF header", []string{"X-CSRF-Token", wrong}},
		{"cross-site", []string{"X-CSRF-Token", meta[1], "Sec-Fetch-Site", "cross-site"}},
	} {
		p := upload(tc.headers...)
		if p.status != http.StatusForbidden || !strings.HasPrefix(p.header.Get("Content-Type"), "application/json") {
			t.Fatalf("%s: %d %s", tc.name, p.status, p.body)
		}
	}
	p = upload("X-CSRF-Token", meta[1], "Sec-Fetch-Site", "same-origin")
	expectStatus(t, p, http.StatusCreated)
	var f map[string]any
	if err := json.Unmarshal([]byte(p.body), &f); err != nil || f["uploaded_by"] != "owner" {
		t.Fatalf("upload answer: %s", p.body)
	}
	// The package page lists it, with its SHA-256 and a download through the API.
	draft = b.get(pkgPath)
	if !strings.Contains(draft.body, "09ca7e4eaa6e8ae9c7d261167129184883644d07dfba7cbfbc4c8a2e08360d5b") {
		t.Fatalf("the file's SHA-256 is not on the page")
	}
	dl := regexp.MustCompile(`href="(/api/v1/packages/[^"]+/content)"`).FindStringSubmatch(draft.body)
	if dl == nil {
		t.Fatal("no owner download link")
	}
	if p := b.get(dl[1]); p.status != http.StatusOK || p.body != "hello, world" {
		t.Fatalf("owner download with the session: %d %q", p.status, p.body)
	}
	// Without a session the API still wants a bearer token.
	anon := e.browser()
	if p := anon.get(dl[1]); p.status != http.StatusUnauthorized {
		t.Fatalf("download without a session: %d", p.status)
	}
}

func TestRecipientPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("ann@example.com", app.RoleRegular)
	ctx := context.Background()
	p, token := e.sent(owner, packages.NewPackage{Title: ptr("Invoices please"), RecipientEmail: ptr("bob@example.com"),
		Direction: ptr("inbound"), Note: ptr("Line one\nLine <two>")})
	b := e.browser()
	rp := b.get("/p/" + token)
	expectStatus(t, rp, http.StatusOK)
	if rp.header.Get("Referrer-Policy") != "no-referrer" || rp.header.Get("Set-Cookie") != "" {
		t.Fatalf("recipient page headers: %v", rp.header)
	}
	if strings.Contains(rp.body, "Line <two>") || !strings.Contains(rp.body, "Line &lt;two&gt;") {
		t.Fatalf("the note is not shown escaped:\n%s", rp.body)
	}
	if !strings.Contains(rp.body, `data-upload-url="/api/v1/links/`+token+`/files"`) || !strings.Contains(rp.body, `type="file"`) {
		t.Fatalf("no drop zone:\n%s", rp.body)
	}
	if _, err := e.packages.Revoke(ctx, owner, app.Client{}, p.ID); err != nil {
		t.Fatal(err)
	}
	dead := b.get("/p/" + token)
	unknown := b.get("/p/" + strings.Repeat("A", 43))
	garbage := b.get("/p/short")
	for _, d := range []page{dead, unknown, garbage} {
		if d.status != http.StatusGone || !strings.Contains(d.body, "This link is no longer available") || d.header.Get("Referrer-Policy") != "no-referrer" {
			t.Fatalf("dead link page: %d %v\n%s", d.status, d.header, d.body)
		}
	}
	if dead.body != unknown.body {
		t.Fatal("a revoked link's page differs from an unknown one's")
	}
}

func TestAdminPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("root@example.com", app.RoleAdmin)
	e.user("ann@example.com", app.RoleRegular)
	reg := e.browser()
	reg.login("ann@example.com")
	for _, path := range []string{"/admin/users", "/admin/webhooks", "/admin/audit"} {
		if p := reg.get(path); p.status != http.StatusForbidden {
			t.Fatalf("%s for a regular user: %d", path, p.status)
		}
	}
	if p := reg.get("/"); strings.Contains(p.body, "/admin/users") {
		t.Fatal("a regular user's menu shows admin pages")
	}

	b := e.browser()
	b.login("root@example.com")
	// Users: bad input re-renders beside the field; a duplicate is refused.
	b.get("/admin/users")
	p := b.post("/admin/users", url.Values{"email": {"carl@example.com"}, "name": {"Carl"}, "role": {"regular"}, "password": {"short"}})
	expectStatus(t, p, http.StatusUnprocessableEntity)
	if fieldError(p, "password") == "" {
		t.Fatalf("no password error:\n%s", p.body)
	}
	p = b.post("/admin/users", url.Values{"email": {"ANN@example.com"}, "name": {"Ann 2"}, "role": {"regular"}})
	expectStatus(t, p, http.StatusUnprocessableEntity)
	if fieldError(p, "email") == "" {
		t.Fatalf("no duplicate e-mail error:\n%s", p.body)
	}
	if n := e.count("users"); n != 2 {
		t.Fatalf("users = %d", n)
	}
	expectRedirect(t, b.post("/admin/users", url.Values{"email": {"carl@example.com"}, "name": {"Carl"}, "role": {"regular"}, "password": {"long-enough-pw"}}), "/admin/users?msg=user-created")

	// Disabling a user ends their session at once; a new password too.
	carl, err := e.identity.UserByEmail(context.Background(), "carl@example.com")
	if err != nil {
		t.Fatal(err)
	}
	cb := e.browser()
	cb.get("/login")
	expectRedirect(t, cb.post("/login", url.Values{"email": {"carl@example.com"}, "password": {"long-enough-pw"}}), "/")
	expectStatus(t, cb.get("/account"), http.StatusOK)
	userPath := fmt.Sprintf("/admin/users/%d", carl.ID)
	b.get(userPath)
	expectRedirect(t, b.post(userPath, url.Values{"name": {"Carl"}, "role": {"regular"}, "disabled": {"true"}}), "/admin/users?msg=user-saved")
	expectRedirect(t, cb.get("/account"), "/login?next=%2Faccount")
	cb.get("/login")
	expectStatus(t, cb.post("/login", url.Values{"email": {"carl@example.com"}, "password": {"long-enough-pw"}}), http.StatusUnauthorized)

	// An admin cannot lock themselves out.
	self := fmt.Sprintf("/admin/users/%d", admin.ID)
	b.get(self)
	expectStatus(t, b.post(self, url.Values{"name": {"Root"}, "role": {"admin"}, "disabled": {"true"}}), http.StatusUnprocessableEntity)

	// Webhooks: every event is checked by default; none checked is an error; the
	// secret is shown once.
	p = b.get("/admin/webhooks")
	if n := strings.Count(p.body, `name="events"`); n != len(events.Types) || strings.Count(p.body, " checked>") != len(events.Types) {
		t.Fatalf("event checkboxes: %d, checked %d", n, strings.Count(p.body, " checked>"))
	}
	p = b.post("/admin/webhooks", url.Values{"url": {"http://127.0.0.1:9/hook"}})
	expectStatus(t, p, http.StatusUnprocessableEntity)
	if fieldError(p, "events") == "" {
		t.Fatalf("no events error:\n%s", p.body)
	}
	p = b.post("/admin/webhooks", url.Values{"url": {"ftp://example.com"}, "events": {"package.created"}})
	expectStatus(t, p, http.StatusUnprocessableEntity)
	if fieldError(p, "url") == "" || !strings.Contains(p.body, `value="package.created" checked`) {
		t.Fatalf("bad URL form:\n%s", p.body)
	}
	for field, bad := range map[string]string{"max_in_flight": "0", "rate_limit": "ten"} {
		p = b.post("/admin/webhooks", url.Values{"url": {"http://127.0.0.1:9/hook"}, "events": {"package.created"}, field: {bad}})
		expectStatus(t, p, http.StatusUnprocessableEntity)
		if fieldError(p, field) == "" || !strings.Contains(p.body, `value="`+bad+`"`) {
			t.Fatalf("bad %s form:\n%s", field, p.body)
		}
	}
	if n := e.count("webhook_subscriptions"); n != 0 {
		t.Fatalf("a bad form created %d webhooks", n)
	}
	p = b.post("/admin/webhooks", url.Values{"url": {"http://127.0.0.1:9/hook"}, "events": {"package.created", "package.expired"},
		"max_in_flight": {"4"}, "rate_limit": {"20"}})
	expectStatus(t, p, http.StatusCreated)
	limits := func() (int, *int) {
		t.Helper()
		var mif int
		var rate *int
		if err := e.pool.QueryRow(context.Background(), "SELECT max_in_flight, rate_limit FROM webhook_subscriptions").Scan(&mif, &rate); err != nil {
			t.Fatal(err)
		}
		return mif, rate
	}
	if mif, rate := limits(); mif != 4 || rate == nil || *rate != 20 {
		t.Fatalf("limits stored: %d %v", mif, rate)
	}
	secret := regexp.MustCompile(`id="secret-value" class="mono" value="(whsec_[^"]+)"`).FindStringSubmatch(p.body)
	if secret == nil {
		t.Fatalf("no secret shown:\n%s", p.body)
	}
	if p := b.get("/admin/webhooks"); strings.Contains(p.body, secret[1]) {
		t.Fatal("the secret is shown again")
	}
	// Test queues a webhook.test event in the outbox.
	var hookID int64
	if err := e.pool.QueryRow(context.Background(), "SELECT id FROM webhook_subscriptions").Scan(&hookID); err != nil {
		t.Fatal(err)
	}
	expectRedirect(t, b.post(fmt.Sprintf("/admin/webhooks/%d/test", hookID), url.Values{"from": {"list"}}), "/admin/webhooks?msg=test-queued")
	if p := b.get(fmt.Sprintf("/admin/webhooks/%d", hookID)); p.status != http.StatusOK || !strings.Contains(p.body, "Delivery log") ||
		!strings.Contains(p.body, `name="max_in_flight" type="number" min="1" max="256" value="4"`) ||
		!strings.Contains(p.body, `name="rate_limit" type="number" min="1" max="10000" value="20"`) {
		t.Fatalf("webhook page: %d\n%s", p.status, p.body)
	}
	// An empty rate limit is none.
	expectStatus(t, b.post(fmt.Sprintf("/admin/webhooks/%d", hookID), url.Values{"url": {"http://127.0.0.1:9/hook"},
		"events": {"package.created"}, "active": {"true"}, "max_in_flight": {"8"}, "rate_limit": {""}}), http.StatusSeeOther)
	if mif, rate := limits(); mif != 8 || rate != nil {
		t.Fatalf("limits after saving: %d %v", mif, rate)
	}
	// The audit log lists the test.
	p = b.get("/admin/audit")
	if !strings.Contains(p.body, "webhook.test") || !strings.Contains(p.body, "root@example.com") {
		t.Fatalf("audit page:\n%s", p.body)
	}
	expectStatus(t, b.get("/admin/audit?package_id=nope"), http.StatusUnprocessableEntity)
}

func TestTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ann@example.com", app.RoleRegular)
	b := e.browser()
	b.login("ann@example.com")
	b.get("/account")
	p := b.post("/account/tokens", url.Values{"name": {""}})
	expectStatus(t, p, http.StatusUnprocessableEntity)
	if fieldError(p, "name") == "" {
		t.Fatalf("no name error:\n%s", p.body)
	}
	p = b.post("/account/tokens", url.Values{"name": {"ci"}, "expires_on": {"2001-01-01"}})
	expectStatus(t, p, http.StatusUnprocessableEntity)
	if fieldError(p, "expires_on") == "" {
		t.Fatalf("no expiry error:\n%s", p.body)
	}
	if n := e.count("api_tokens"); n != 0 {
		t.Fatalf("bad forms created %d tokens", n)
	}
	p = b.post("/account/tokens", url.Values{"name": {"ci"}, "expires_on": {"2099-12-31"}})
	expectStatus(t, p, http.StatusCreated)
	raw := regexp.MustCompile(`value="(sf_[A-Za-z0-9_-]{43})"`).FindStringSubmatch(p.body)
	if raw == nil {
		t.Fatalf("raw token not shown:\n%s", p.body)
	}
	if !strings.Contains(p.body, "<code>"+raw[1][:11]+"…</code>") || !strings.Contains(p.body, "2100-01-01 00:00 UTC") {
		t.Fatal("the list does not show the token by its prefix and expiry")
	}
	// The token works on the API; the page never shows it again.
	req, _ := http.NewRequest("GET", e.url+"/api/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+raw[1])
	if p := e.browser().do(req); p.status != http.StatusOK {
		t.Fatalf("the new token: %d", p.status)
	}
	p = b.get("/account")
	if strings.Contains(p.body, raw[1]) {
		t.Fatal("the raw token is shown again")
	}
	id := regexp.MustCompile(`action="/account/tokens/(\d+)/revoke"`).FindStringSubmatch(p.body)
	expectRedirect(t, b.post("/account/tokens/"+id[1]+"/revoke", url.Values{}), "/account?msg=token-revoked")
	if p := e.browser().do(req); p.status != http.StatusUnauthorized {
		t.Fatalf("the revoked token: %d", p.status)
	}
}

func ptr[T any](v T) *T { return &v }

// TestSetupRace submits the setup form from several browsers at once: exactly one
// admin is created and the others find the page gone (or, on a loaded machine, are told
// to come back: 503 when no password-hashing slot frees within 2 s, docs/WEB-UI.md,
// "Sessions"), and none gets an error.
func TestSetupRace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 8
	browsers := make([]*browser, n)
	for i := range browsers {
		browsers[i] = e.browser()
		expectStatus(t, browsers[i].get("/setup"), http.StatusOK)
	}
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i, b := range browsers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = b.post("/setup", url.Values{"_csrf": {b.csrf}, "email": {fmt.Sprintf("admin%d@example.com", i)},
				"name": {"A"}, "password": {"long-enough-pw"}, "password_again": {"long-enough-pw"}}).status
		}()
	}
	wg.Wait()
	if got := e.count("users"); got != 1 {
		t.Fatalf("%d users after %d racing setups (statuses %v), want 1", got, n, statuses)
	}
	for _, s := range statuses {
		if s >= 500 && s != http.StatusServiceUnavailable {
			t.Fatalf("a racing setup answered %d (statuses %v)", s, statuses)
		}
	}
}
