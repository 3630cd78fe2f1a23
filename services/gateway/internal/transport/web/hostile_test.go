package web_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
	"github.com/shipfile/shipfile/services/gateway/internal/service"
)

// TestLinkCookieSecureOnPage: with SHIPFILE_COOKIE_SECURE on, the link grant cookie
// that the recipient page's password form sets is Secure although the request came
// over plain HTTP (TLS ends at the ingress), like every other cookie of shipfile
// (docs/CONFIGURATION.md, SHIPFILE_COOKIE_SECURE); off, it is not.
func TestLinkCookieSecureOnPage(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "secure", false: "plain"}[on], func(t *testing.T) {
			t.Parallel()
			var e *env
			if on {
				e = newEnv(t, secure)
			} else {
				e = newEnv(t)
			}
			owner := e.user("ann@example.com", app.RoleRegular)
			_, token := e.sent(owner, packages.NewPackage{Title: ptr("Locked"), RecipientEmail: ptr("bob@example.com"),
				Direction: ptr("inbound"), Password: ptr("let me in please")})
			b := e.browser()
			form := b.get("/p/" + token)
			expectStatus(t, form, http.StatusOK)
			// The jar does not send Secure cookies over plain HTTP: carry the CSRF
			// cookie by hand.
			var csrfCookie string
			for _, sc := range form.header.Values("Set-Cookie") {
				if strings.Contains(sc, "shipfile_csrf=") {
					csrfCookie = strings.SplitN(sc, ";", 2)[0]
				}
			}
			body := url.Values{"_csrf": {b.csrf}, "password": {"let me in please"}}
			req, _ := http.NewRequest("POST", e.url+"/p/"+token, strings.NewReader(body.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Cookie", csrfCookie)
			ok := b.do(req)
			expectRedirect(t, ok, "/p/"+token)
			var grants []string
			for _, sc := range ok.header.Values("Set-Cookie") {
				if strings.HasPrefix(sc, "shipfile_link=") {
					grants = append(grants, sc)
				}
			}
			if len(grants) != 2 {
				t.Fatalf("Set-Cookie = %q, want two shipfile_link cookies", ok.header.Values("Set-Cookie"))
			}
			for _, c := range grants {
				if got := strings.Contains(c, "; Secure"); got != on {
					t.Fatalf("cookie %q: Secure %v, want %v", c, got, on)
				}
			}
		})
	}
}

// TestBrowserUserOpenUploads: a browser user (the session, no token) has at most
// SHIPFILE_UPLOAD_MAX_OPEN unfinished tus uploads at once (docs/UPLOADS.md): the next
// creation is 429 with Retry-After; ending one makes room; the same user's API token counts
// on its own.
func TestBrowserUserOpenUploads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.edge = service.EdgeConfig{UploadMaxOpen: 2} })
	u, b := e.signedIn("ann@example.com")
	p, err := e.packages.Create(context.Background(), u, app.Client{}, packages.NewPackage{Title: ptr("Draft"), RecipientEmail: ptr("bob@example.com")})
	if err != nil {
		t.Fatal(err)
	}
	pkgPage := b.get("/packages/" + p.ID.String())
	expectStatus(t, pkgPage, http.StatusOK)
	meta := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindStringSubmatch(pkgPage.body)
	if meta == nil {
		t.Fatal("the package page has no CSRF token")
	}
	creation := "/api/v1/packages/" + p.ID.String() + "/uploads"
	tus := func(method, path string, headers ...string) page {
		req, _ := http.NewRequest(method, e.url+path, nil)
		req.Header.Set("Tus-Resumable", "1.0.0")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		return b.do(req)
	}
	create := func(headers ...string) page {
		return tus("POST", creation, append([]string{"X-CSRF-Token", meta[1], "Upload-Length", "10",
			"Upload-Metadata", "filename " + base64.StdEncoding.EncodeToString([]byte("a.bin"))}, headers...)...)
	}
	var locations []string
	for range 2 {
		r := create()
		expectStatus(t, r, http.StatusCreated)
		locations = append(locations, r.header.Get("Location"))
	}
	r := create()
	expectStatus(t, r, http.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// The same user's API token counts on its own.
	_, token, err := e.identity.CreateToken(context.Background(), u.ID, "cli", nil, identity.System)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", e.url+creation, nil)
	for k, v := range map[string]string{"Tus-Resumable": "1.0.0", "Authorization": "Bearer " + token, "Upload-Length": "10",
		"Upload-Metadata": "filename " + base64.StdEncoding.EncodeToString([]byte("b.bin"))} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("the token's creation = %d, want 201", resp.StatusCode)
	}
	// Ending one of the browser's makes room.
	loc, err := url.Parse(locations[0])
	if err != nil {
		t.Fatal(err)
	}
	expectStatus(t, tus("DELETE", loc.Path, "X-CSRF-Token", meta[1]), http.StatusNoContent)
	expectStatus(t, create(), http.StatusCreated)
}
