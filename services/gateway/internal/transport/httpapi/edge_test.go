package httpapi_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/httpapi"
)

// TestOpsEndpointsNotPublic: /readyz and /metrics are not on the public router (the
// gateway serves them on SHIPFILE_OPS_ADDR); /api/v1/health and /healthz are.
func TestOpsEndpointsNotPublic(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	expect(t, a.do("GET", "/api/v1/health", "", nil), http.StatusOK)
	expect(t, a.do("GET", "/healthz", "", nil), http.StatusOK)
	for _, path := range []string{"/readyz", "/metrics"} {
		if r := a.do("GET", path, "", nil); r.status != http.StatusNotFound {
			t.Errorf("GET %s on the public address = %d, want 404", path, r.status)
		}
	}
}

// TestDeadLinkIsGoneFirst: every link route answers 410 for a dead link before it
// looks at anything else of the request.
func TestDeadLinkIsGoneFirst(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com", "direction": "inbound"})
	fin := a.do("POST", "/api/v1/packages/"+p["id"].(string)+"/finalize", token, nil).json(t)
	revoked := linkToken(t, fin["magic_link"])
	expect(t, a.do("POST", "/api/v1/packages/"+p["id"].(string)+"/revoke", token, nil), http.StatusOK)
	for name, link := range map[string]string{"revoked": revoked, "unknown": strings.Repeat("B", 43)} {
		t.Run(name, func(t *testing.T) {
			base := "/api/v1/links/" + link
			expect(t, a.do("GET", base+"/files/not-a-uuid", "", nil), http.StatusGone)
			expect(t, a.do("GET", base+"/files/00000000-0000-0000-0000-000000000000", "", nil), http.StatusGone)
			expect(t, a.do("POST", base+"/files", "", nil, "Content-Type", "text/plain", "X-Raw-Body", "x"), http.StatusGone)
			expect(t, a.do("POST", base+"/files", "", nil, "Content-Type", "multipart/form-data", "X-Raw-Body", "x"), http.StatusGone)
			expect(t, a.do("GET", base+"/archive", "", nil), http.StatusGone)
		})
	}
}

// TestInboundLinkHidesRecipientFiles: what the recipient uploaded through a request
// link cannot be downloaded through it (403, left out of the archive); what the
// owner put in can.
func TestInboundLinkHidesRecipientFiles(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "Send me", "recipient_email": "r@example.com", "direction": "inbound"})
	base := "/api/v1/packages/" + p["id"].(string)
	r := a.upload(base+"/files", token, "brief.txt", []byte("what I need"))
	expect(t, r, http.StatusCreated)
	ownerFile := r.json(t)["id"].(string)
	link := linkToken(t, a.do("POST", base+"/finalize", token, nil).json(t)["magic_link"])
	r = a.upload("/api/v1/links/"+link+"/files", "", "secret.pdf", []byte("the recipient's secret"))
	expect(t, r, http.StatusCreated)
	recipientFile := r.json(t)["id"].(string)

	if r := a.do("GET", "/api/v1/links/"+link+"/files/"+ownerFile, "", nil); r.status != http.StatusOK || string(r.body) != "what I need" {
		t.Fatalf("owner's file through the link: %d %q", r.status, r.body)
	}
	expect(t, a.do("GET", "/api/v1/links/"+link+"/files/"+recipientFile, "", nil), http.StatusForbidden)
	if r := a.do("HEAD", "/api/v1/links/"+link+"/files/"+recipientFile, "", nil); r.status != http.StatusForbidden {
		t.Fatalf("HEAD of the recipient's file through the link = %d, want 403", r.status)
	}
	r = a.do("GET", "/api/v1/links/"+link+"/archive", "", nil)
	if r.status != http.StatusOK {
		t.Fatalf("archive: %d %s", r.status, r.body)
	}
	zr, err := zip.NewReader(bytes.NewReader(r.body), int64(len(r.body)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	if len(names) != 1 || names[0] != "brief.txt" {
		t.Fatalf("archive holds %v, want only brief.txt", names)
	}
	// The owner still gets the recipient's file.
	expect(t, a.do("GET", base+"/files/"+recipientFile+"/content", token, nil), http.StatusOK)
}

// TestLinkRateLimit: one client IP gets the burst of link requests, then 429 with
// Retry-After, and the refused requests write no audit rows. X-Forwarded-For from
// an untrusted peer does not make another client.
func TestLinkRateLimit(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig(), withLinkRate(0.5, 3))
	dead := "/api/v1/links/" + strings.Repeat("C", 43)
	for i := range 3 {
		expect(t, a.do("GET", dead, "", nil, "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i)), http.StatusGone)
	}
	r := a.do("GET", dead, "", nil, "X-Forwarded-For", "198.51.100.7")
	expect(t, r, http.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	if r := a.do("GET", "/p/"+strings.Repeat("C", 43), "", nil); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("recipient page over the rate: %d %v", r.status, r.header)
	}
	// The 3 admitted hits of a dead link are counted in one row (one IP, one hour).
	var rows, hits int
	if err := a.pool.QueryRow(context.Background(), "SELECT count(*), coalesce(sum(hits), 0) FROM audit_log").Scan(&rows, &hits); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || hits != 3 {
		t.Fatalf("audit rows = %d counting %d hits, want 1 counting 3 (refused requests write none)", rows, hits)
	}
	// The API itself is not behind the link rate.
	expect(t, a.do("GET", "/api/v1/health", "", nil), http.StatusOK)
}

// stalledUpload starts an upload of filename whose body sends head and then nothing
// until the returned stop is called; the answer arrives on the channel.
func (a *testAPI) stalledUpload(path, token string, head []byte) (<-chan response, func()) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan response, 1)
	stop := make(chan struct{})
	go func() {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="slow.bin"`)
		w, _ := mw.CreatePart(h)
		_, _ = w.Write(head)
		<-stop
		_ = pw.CloseWithError(io.ErrUnexpectedEOF)
	}()
	go func() {
		req, _ := http.NewRequest("POST", a.url+path, pr)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := a.client(0).Do(req)
		if err != nil {
			done <- response{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- response{status: resp.StatusCode, header: resp.Header, body: b}
	}()
	var once sync.Once
	return done, func() { once.Do(func() { close(stop) }) }
}

// TestUploadsInFlight: a client past its uploads in flight gets 429, the gateway
// past its own 503, both with Retry-After; a finished upload frees its slot.
func TestUploadsInFlight(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Uploads = httpapi.UploadLimits{MaxConcurrent: 2, PerClient: 1}
	a := newTestAPI(t, cfg)
	_, ann := a.user("ann@example.com", app.RoleRegular)
	_, bob := a.user("bob@example.com", app.RoleRegular)
	_, cid := a.user("cid@example.com", app.RoleRegular)
	draft := func(token string) string {
		return "/api/v1/packages/" + a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})["id"].(string) + "/files"
	}
	annPath, bobPath, cidPath := draft(ann), draft(bob), draft(cid)

	annDone, annStop := a.stalledUpload(annPath, ann, []byte("x"))
	defer annStop()
	waitInFlight(t, a, 1)
	r := a.upload(annPath, ann, "second.txt", []byte("y"))
	expect(t, r, http.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	bobDone, bobStop := a.stalledUpload(bobPath, bob, []byte("x"))
	defer bobStop()
	waitInFlight(t, a, 2)
	r = a.upload(cidPath, cid, "third.txt", []byte("z"))
	expect(t, r, http.StatusServiceUnavailable)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	annStop()
	bobStop()
	<-annDone
	<-bobDone
	servicetest.WaitFor(t, 5*time.Second, "slots released", func() bool { return a.inFlight() == 0 })
	expect(t, a.upload(cidPath, cid, "third.txt", []byte("z")), http.StatusCreated)
}

// waitInFlight waits until n uploads hold their slots (the gateway's
// shipfile_uploads_in_flight gauge).
func waitInFlight(t *testing.T, a *testAPI, n int) {
	t.Helper()
	servicetest.WaitFor(t, 5*time.Second, "uploads in flight", func() bool { return a.inFlight() >= n })
}

// TestSlowUploadIsCut: a body that stalls after its first bytes is cut off within
// the rate window (408), and nothing of it stays in the object store.
func TestSlowUploadIsCut(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Uploads = httpapi.UploadLimits{MinRate: 64 << 10, RateWindow: 300 * time.Millisecond}
	cfg.MaxFileSize = 16 << 20
	a := newTestAPI(t, cfg)
	_, token := a.user("ann@example.com", app.RoleRegular)
	path := "/api/v1/packages/" + a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})["id"].(string) + "/files"
	start := time.Now()
	done, stop := a.stalledUpload(path, token, bytes.Repeat([]byte("a"), 6<<20)) // more than one 5 MiB part
	defer stop()
	var r response
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled upload was not cut off within 10 s")
	}
	if r.status != http.StatusRequestTimeout && r.status != -1 {
		t.Fatalf("stalled upload answered %d %s, want 408 (or a cut connection)", r.status, r.body)
	}
	t.Logf("cut after %s: %d", time.Since(start).Round(time.Millisecond), r.status)
	if keys := a.objectKeys(); len(keys) != 0 {
		t.Fatalf("a cut upload left objects %v", keys)
	}
	for u := range a.objects.Client.ListIncompleteUploads(context.Background(), a.objects.Bucket, "", true) {
		t.Fatalf("a cut upload left an incomplete multipart upload %s (%v)", u.Key, u.Err)
	}
	if n := a.rowCount("files"); n != 0 {
		t.Fatalf("files = %d", n)
	}
	// A body at a good pace is not cut.
	expect(t, a.upload(path, token, "fine.txt", bytes.Repeat([]byte("b"), 1<<20)), http.StatusCreated)
}

// TestHostileUploadHeaders: a huge Content-Type is stored as application/octet-stream
// (not a 500), a filename or title with bidi or other invisible characters is 422,
// and a huge User-Agent is cut to 512 bytes in the audit log.
func TestHostileUploadHeaders(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("ann@example.com", app.RoleRegular)
	pkg := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	path := "/api/v1/packages/" + pkg["id"].(string) + "/files"
	send := func(filename, contentType string, headers ...string) response {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="`+filename+`"`)
		h.Set("Content-Type", contentType)
		w, _ := mw.CreatePart(h)
		_, _ = w.Write([]byte("content"))
		_ = mw.Close()
		return a.do("POST", path, token, nil, append([]string{"Content-Type", mw.FormDataContentType(), "X-Raw-Body", body.String()}, headers...)...)
	}
	huge := "text/plain; x=" + strings.Repeat("a", 60<<10)
	r := send("big-type.txt", huge, "User-Agent", strings.Repeat("U", 10<<10))
	expect(t, r, http.StatusCreated)
	if ct := r.json(t)["content_type"]; ct != "application/octet-stream" {
		t.Fatalf("content_type = %v, want application/octet-stream", ct)
	}
	r = send("params.txt", `Text/Plain; charset="UTF-8"; name=x; boundary=y`)
	expect(t, r, http.StatusCreated)
	if ct := r.json(t)["content_type"]; ct != "text/plain; charset=utf-8" {
		t.Fatalf("content_type = %v, want text/plain; charset=utf-8", ct)
	}
	r = send("long-type.txt", "application/"+strings.Repeat("x", 200))
	expect(t, r, http.StatusCreated)
	if ct := r.json(t)["content_type"]; ct != "application/octet-stream" {
		t.Fatalf("content_type = %v, want application/octet-stream", ct)
	}
	var ua int
	if err := a.pool.QueryRow(context.Background(), "SELECT max(octet_length(user_agent)) FROM audit_log").Scan(&ua); err != nil || ua > 512 {
		t.Fatalf("longest stored User-Agent = %d bytes (%v), want at most 512", ua, err)
	}
	for name, fn := range map[string]string{"bidi override": "invoice\u202Efdp.exe", "zero width": "a\u200Bb.txt", "tab": "a\tb.txt"} {
		if r := send(fn, "text/plain"); r.status != http.StatusUnprocessableEntity {
			t.Errorf("filename with %s: %d, want 422", name, r.status)
		}
	}
	r = a.do("POST", "/api/v1/packages", token, map[string]any{"title": "Invoice \u202Efdp.exe", "recipient_email": "r@example.com"})
	expect(t, r, http.StatusUnprocessableEntity)
}

// TestLastAdmin: the API refuses to demote or disable the last active admin (409);
// with a second admin, one of them may go.
func TestLastAdmin(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	root, token := a.user("root@example.com", app.RoleAdmin)
	self := fmt.Sprintf("/api/v1/admin/users/%d", root.ID)
	expect(t, a.do("PATCH", self, token, map[string]any{"role": "regular"}), http.StatusConflict)
	expect(t, a.do("PATCH", self, token, map[string]any{"disabled": true}), http.StatusConflict)
	expect(t, a.do("PATCH", self, token, map[string]any{"name": "Still root"}), http.StatusOK)
	second, _ := a.user("second@example.com", app.RoleAdmin)
	expect(t, a.do("PATCH", fmt.Sprintf("/api/v1/admin/users/%d", second.ID), token, map[string]any{"disabled": true}), http.StatusOK)
	expect(t, a.do("PATCH", self, token, map[string]any{"role": "regular"}), http.StatusConflict)
	expect(t, a.do("PATCH", fmt.Sprintf("/api/v1/admin/users/%d", second.ID), token, map[string]any{"disabled": false}), http.StatusOK)
	expect(t, a.do("PATCH", self, token, map[string]any{"role": "regular"}), http.StatusOK)
}

// TestPasswordHashingBounded: with one hashing slot and a short wait, parallel
// password changes beyond it get 503 with Retry-After rather than queueing without
// bound; none gets a 500.
func TestPasswordHashingBounded(t *testing.T) {
	t.Parallel()
	hasher := app.NewHasher(1, 5*time.Millisecond)
	a := newTestAPI(t, defaultConfig(), withHasher(hasher))
	_, token := a.user("root@example.com", app.RoleAdmin)
	target, _ := a.user("someone@example.com", app.RoleRegular)
	path := fmt.Sprintf("/api/v1/admin/users/%d", target.ID)
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			r := a.do("PATCH", path, token, map[string]any{"password": fmt.Sprintf("a new password %d", i)})
			if r.status == http.StatusServiceUnavailable && r.header.Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
			mu.Lock()
			counts[r.status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if counts[http.StatusOK] == 0 || counts[http.StatusServiceUnavailable] == 0 || counts[http.StatusOK]+counts[http.StatusServiceUnavailable] != 8 {
		t.Fatalf("answers %v, want some 200 and some 503 only", counts)
	}
}
