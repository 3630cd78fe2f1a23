package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/secretbox"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/httpapi"
)

// TestEditRefusesWhatCreateRefuses: PATCH /api/v1/packages/{id} refuses the control
// and format characters that create refuses (docs/API.md, "Hostile clients", edits): 422,
// and the package keeps its texts.
func TestEditRefusesWhatCreateRefuses(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("editor@example.com", app.RoleRegular)
	r := a.do("POST", "/api/v1/packages", token, map[string]any{"title": "Q3 report", "recipient_email": "r@example.com", "recipient_name": "Rita", "note": "Hi"})
	expect(t, r, http.StatusCreated)
	path := "/api/v1/packages/" + r.json(t)["id"].(string)
	for name, body := range map[string]map[string]any{
		"title with a bidi override":     {"title": "Invoice \u202Efdp.exe"},
		"title with a zero-width space":  {"title": "a\u200Bb"},
		"title with a C1 control":        {"title": "a\u0085b"},
		"title with a tab":               {"title": "a\tb"},
		"recipient_name with a bidi":     {"recipient_name": "Rita \u202Egnal"},
		"recipient_name with an isolate": {"recipient_name": "Rita \u2066x\u2069"},
		"recipient_name with a C1":       {"recipient_name": "Rita\u009b"},
		"note with a bidi override":      {"note": "see \u202Etxt.exe"},
		"note with a NUL":                {"note": "a\x00b"},
	} {
		t.Run(name, func(t *testing.T) {
			expect(t, a.do("PATCH", path, token, body), http.StatusUnprocessableEntity)
			// Create refuses it the same way.
			create := map[string]any{"title": "ok", "recipient_email": "r@example.com"}
			for k, v := range body {
				create[k] = v
			}
			expect(t, a.do("POST", "/api/v1/packages", token, create), http.StatusUnprocessableEntity)
		})
	}
	got := a.do("GET", path, token, nil).json(t)
	if got["title"] != "Q3 report" || got["recipient_name"] != "Rita" || got["note"] != "Hi" {
		t.Fatalf("after refused edits: title %q, recipient_name %q, note %q", got["title"], got["recipient_name"], got["note"])
	}
	// What create accepts, an edit accepts: lines in a note, joiners in a name.
	expect(t, a.do("PATCH", path, token, map[string]any{"title": "Q4 report", "note": "line 1\nline 2\ttab", "recipient_name": "Mi\u200Cnoo"}), http.StatusOK)
}

// TestTokenLifetimeBoundByParent: a token created with a token expires no later than
// that token (docs/API.md, "Hostile clients", token lifetime); the record shows the expiry
// it got. A session or a token that never expires mints what it asks for.
func TestTokenLifetimeBoundByParent(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	u, forever := a.user("tokens@example.com", app.RoleRegular)
	parentExp := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	_, short, err := a.identity.CreateToken(context.Background(), u.ID, "short", &parentExp, identity.System)
	if err != nil {
		t.Fatal(err)
	}
	want := parentExp.Format(time.RFC3339)
	for name, c := range map[string]struct {
		body map[string]any
		want string
	}{
		"no expiry":      {map[string]any{"name": "child"}, want},
		"a later expiry": {map[string]any{"name": "child", "expires_at": "2099-01-01T00:00:00Z"}, want},
		"an earlier one": {map[string]any{"name": "child", "expires_at": parentExp.Add(-time.Hour).Format(time.RFC3339)}, parentExp.Add(-time.Hour).Format(time.RFC3339)},
	} {
		t.Run(name, func(t *testing.T) {
			r := a.do("POST", "/api/v1/me/tokens", short, c.body)
			expect(t, r, http.StatusCreated)
			got, _ := r.json(t)["expires_at"].(string)
			gotT, err := time.Parse(time.RFC3339Nano, got)
			wantT, _ := time.Parse(time.RFC3339, c.want)
			if err != nil || !gotT.Equal(wantT) {
				t.Fatalf("expires_at = %q, want %s", got, c.want)
			}
			// The child's list record says the same.
			child := r.json(t)["token"].(string)
			list := a.do("GET", "/api/v1/me/tokens", child, nil).json(t)["items"].([]any)
			found := false
			for _, it := range list {
				m := it.(map[string]any)
				if m["id"] == r.json(t)["id"] {
					found = true
					if lt, err := time.Parse(time.RFC3339Nano, m["expires_at"].(string)); err != nil || !lt.Equal(wantT) {
						t.Fatalf("listed expires_at = %v, want %s", m["expires_at"], c.want)
					}
				}
			}
			if !found {
				t.Fatal("the new token is not in the list")
			}
		})
	}
	// A token that never expires may mint one that never expires.
	r := a.do("POST", "/api/v1/me/tokens", forever, map[string]any{"name": "free"})
	expect(t, r, http.StatusCreated)
	if r.json(t)["expires_at"] != nil {
		t.Fatalf("expires_at = %v, want null", r.json(t)["expires_at"])
	}
}

// TestGrantCookieSecure: with SHIPFILE_COOKIE_SECURE on, the API's link grant cookie
// is Secure although the request came over plain HTTP (TLS ends at the ingress), as
// every other cookie of shipfile (docs/CONFIGURATION.md, SHIPFILE_COOKIE_SECURE); off, it is not.
func TestGrantCookieSecure(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{true, false} {
		t.Run(fmt.Sprintf("secure=%v", secure), func(t *testing.T) {
			t.Parallel()
			cfg := defaultConfig()
			cfg.SecureCookies = secure
			a := newTestAPI(t, cfg)
			_, token := a.user("owner@example.com", app.RoleRegular)
			_, link := a.sharedPackage(token, map[string]any{"password": "open sesame"}, "a.txt")
			r := a.unlock(link, "open sesame")
			expect(t, r, http.StatusOK)
			cookies := r.header.Values("Set-Cookie")
			if len(cookies) != 2 {
				t.Fatalf("Set-Cookie = %q, want two", cookies)
			}
			for _, c := range cookies {
				if got := strings.Contains(c, "; Secure"); got != secure {
					t.Fatalf("cookie %q: Secure %v, want %v", c, got, secure)
				}
			}
		})
	}
}

// trickle sends body in pieces of n bytes, one every interval (chunked), and returns
// the answer (status -1 when the connection broke before one came) and how long it
// took.
func (a *testAPI) trickle(method, path, token, contentType string, body []byte, n int, interval time.Duration, headers ...string) (response, time.Duration) {
	a.t.Helper()
	pr, pw := io.Pipe()
	go func() {
		for len(body) > 0 {
			k := min(n, len(body))
			if _, err := pw.Write(body[:k]); err != nil {
				return
			}
			body = body[k:]
			time.Sleep(interval)
		}
		pw.Close()
	}()
	defer pr.Close()
	req, err := http.NewRequest(method, a.url+path, pr)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	start := time.Now()
	resp, err := a.client(30 * time.Second).Do(req)
	if err != nil {
		return response{status: -1}, time.Since(start)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}, time.Since(start)
}

// TestSlowBodiesEveryRoute: JSON and form bodies that take longer than the time
// limit (SHIPFILE_HTTP_BODY_TIMEOUT) or come slower than the minimum rate are cut
// off with 408 {"detail"} on every route, the anonymous ones first (docs/API.md, "States and
// errors": 408); uploads keep their own rules and are not cut by the time limit.
func TestSlowBodiesEveryRoute(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Bodies = httpapi.BodyLimits{Timeout: 600 * time.Millisecond}
	a := newTestAPI(t, cfg)
	_, token := a.user("slow@example.com", app.RoleRegular)
	_, link := a.sharedPackage(token, map[string]any{"password": "open sesame"}, "a.txt")

	// A JSON body of a few bytes every 100 ms: within the rate, past the time limit.
	unlock := []byte(`{"password": "open sesame and a good deal more of it"}`)
	for name, c := range map[string]struct {
		path, token, contentType string
		body                     []byte
	}{
		"link unlock (anonymous JSON)": {"/api/v1/links/" + link + "/unlock", "", "application/json", unlock},
		"token create (JSON)":          {"/api/v1/me/tokens", token, "application/json", []byte(`{"name": "a token with a long, long, long, long name"}`)},
		"sign-in form":                 {"/login", "", "application/x-www-form-urlencoded", []byte("email=ann%40example.com&password=a+wrong+password+for+sure")},
	} {
		t.Run(name, func(t *testing.T) {
			r, took := a.trickle("POST", c.path, c.token, c.contentType, c.body, 4, 100*time.Millisecond)
			if r.status != http.StatusRequestTimeout {
				t.Fatalf("status = %d, want 408; body: %s", r.status, r.body)
			}
			if took > 3*time.Second {
				t.Fatalf("answered after %s, want about the 600 ms limit", took)
			}
			if strings.HasPrefix(c.path, "/api/") {
				expect(t, r, http.StatusRequestTimeout)
			}
		})
	}
	// The same bodies sent at once go through.
	expect(t, a.do("POST", "/api/v1/links/"+link+"/unlock", "", string(unlock)), http.StatusUnauthorized)
	// An upload taking longer than the limit (above its own minimum rate) is stored.
	id := a.createPackage(token, map[string]any{"title": "slow upload", "recipient_email": "r@example.com"})["id"].(string)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "slow.txt")
	_, _ = fw.Write(bytes.Repeat([]byte("u"), 20000))
	_ = mw.Close()
	r, took := a.trickle("POST", "/api/v1/packages/"+id+"/files", token, mw.FormDataContentType(), body.Bytes(), 2000, 100*time.Millisecond)
	expect(t, r, http.StatusCreated)
	if took < 600*time.Millisecond {
		t.Fatalf("the upload took %s, want longer than the body time limit for this test to mean anything", took)
	}
	// So is a tus PATCH.
	upload := a.tusCreate("/api/v1/packages/"+id+"/uploads", token, 20000)
	r, took = a.trickle("PATCH", strings.TrimPrefix(upload, a.url), token, "application/offset+octet-stream", bytes.Repeat([]byte("p"), 20000), 2000, 100*time.Millisecond,
		"Tus-Resumable", "1.0.0", "Upload-Offset", "0")
	if r.status != http.StatusNoContent || took < 600*time.Millisecond {
		t.Fatalf("tus PATCH over %s: %d %s, want 204 after more than the body time limit", took, r.status, r.body)
	}
}

// TestSlowBodiesMinRate: a JSON body slower than the minimum rate is cut off after a
// rate window (408), without any time limit set.
func TestSlowBodiesMinRate(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Bodies = httpapi.BodyLimits{MinRate: 1000, RateWindow: 300 * time.Millisecond}
	a := newTestAPI(t, cfg)
	_, token := a.user("trickle@example.com", app.RoleRegular)
	body := []byte(`{"title": "` + strings.Repeat("t", 150) + `", "recipient_email": "r@example.com"}`)
	r, took := a.trickle("POST", "/api/v1/packages", token, "application/json", body, 1, 50*time.Millisecond) // 20 bytes/s
	expect(t, r, http.StatusRequestTimeout)
	if took > 3*time.Second {
		t.Fatalf("answered after %s, want about one 300 ms window", took)
	}
	if n := a.rowCount("packages"); n != 0 {
		t.Fatalf("%d packages stored from a cut body", n)
	}
	// Fast enough: created.
	expect(t, a.do("POST", "/api/v1/packages", token, string(body)), http.StatusCreated)
}

// TestMagicLinkSealedAtRest: after a package is finalized, no row of the outbox
// holds its raw magic link (docs/API.md, "Hostile clients", magic links at rest): the mail
// job's payload is sealed under SHIPFILE_SECRET_KEY, and opens to the job with the
// link (what the relay publishes to the mailer).
func TestMagicLinkSealedAtRest(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("sealer@example.com", app.RoleRegular)
	id, link := a.sharedPackage(token, nil, "a.txt")
	var magicLink string
	for _, r := range a.outboxRows() {
		if bytes.Contains(r.payload, []byte(link)) {
			t.Fatalf("outbox row %s on %s holds the raw link token", r.msgID, r.subject)
		}
		if !strings.HasPrefix(r.subject, "shipfile.mail.") {
			continue
		}
		if !secretbox.IsSealed(string(r.payload)) {
			t.Fatalf("mail job %s is not sealed: %q…", r.msgID, r.payload[:min(len(r.payload), 16)])
		}
		opened, err := servicetest.Keyring(t).Open(string(r.payload))
		if err != nil {
			t.Fatal(err)
		}
		job, err := events.UnmarshalMailJob([]byte(opened))
		if err != nil {
			t.Fatal(err)
		}
		if job.GetPackageId() != id {
			t.Fatalf("mail job of package %s, want %s", job.GetPackageId(), id)
		}
		magicLink = job.GetMagicLink()
	}
	if !strings.HasSuffix(magicLink, "/p/"+link) {
		t.Fatalf("no sealed mail job with the link (magic link %q)", magicLink)
	}
	// Nothing else in the database holds it either.
	var n int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE position($1::bytea IN coalesce(payload, ''::bytea)) > 0`, []byte(link)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d outbox rows hold the link token (%v)", n, err)
	}
}
