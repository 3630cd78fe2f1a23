package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/httpapi"
)

// runningPatch is a PATCH whose body the test feeds through a pipe.
type runningPatch struct {
	body io.WriteCloser
	done chan response // its answer; status 0 when the request failed
}

// startPatch sends a PATCH of length bytes at offset on url and writes first into its
// body; the rest is the test's to write (or not: a client gone quiet).
func (a *testAPI) startPatch(url, token string, offset, length int, first []byte) *runningPatch {
	a.t.Helper()
	pr, pw := io.Pipe()
	p := &runningPatch{body: pw, done: make(chan response, 1)}
	go func() {
		req, _ := http.NewRequest("PATCH", a.url+url, pr)
		req.ContentLength = int64(length)
		req.Header.Set("Tus-Resumable", "1.0.0")
		req.Header.Set("Content-Type", "application/offset+octet-stream")
		req.Header.Set("Upload-Offset", strconv.Itoa(offset))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := a.client(0).Do(req)
		if err != nil {
			p.done <- response{}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		p.done <- response{status: resp.StatusCode, header: resp.Header, body: b}
	}()
	a.t.Cleanup(func() { pw.Close() })
	if _, err := pw.Write(first); err != nil {
		a.t.Fatal(err)
	}
	return p
}

// wait returns the PATCH's answer within d.
func (p *runningPatch) wait(t *testing.T, d time.Duration) response {
	t.Helper()
	select {
	case r := <-p.done:
		return r
	case <-time.After(d):
		t.Fatalf("the PATCH did not end within %s", d)
		return response{}
	}
}

// uploadRow reads the upload's saved offset, part count and lease owner.
func (a *testAPI) uploadRow(url string) (offset int64, parts int, owner string) {
	a.t.Helper()
	id := url[strings.LastIndex(url, "/")+1:]
	var raw []byte
	err := a.pool.QueryRow(context.Background(),
		`SELECT "offset", parts, COALESCE(lock_owner::text, '') FROM tus_uploads WHERE id = $1`, id).Scan(&offset, &raw, &owner)
	if err != nil {
		a.t.Fatal(err)
	}
	var ps []any
	if err := json.Unmarshal(raw, &ps); err != nil {
		a.t.Fatal(err)
	}
	return offset, len(ps), owner
}

// TestTusHandOver: a PATCH whose client went quiet (a dropped connection the gateway
// has not noticed) holds its upload; a HEAD, here on another gateway instance, asks
// it to let go: it stores everything that reached the gateway (its part and the
// bytes of the next one in its buffer) and the HEAD reports that offset within
// SHIPFILE_UPLOAD_LOCK_WAIT, well before the lease (30 s) could lapse. The PATCH from
// there succeeds (no 423), and the quiet PATCH is answered 400.
func TestTusHandOver(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig(), withTusLease(30*time.Second, 5*time.Second))
	b := a.secondInstance()
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	content := randomBytes(t, 12<<20)
	url := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", token, len(content))

	const sent = 7 << 20
	first := a.startPatch(url, token, 0, len(content), content[:sent])
	servicetest.WaitFor(t, 10*time.Second, "the first PATCH to store its first part", func() bool {
		off, _, owner := a.uploadRow(url)
		return off == 5<<20 && owner != ""
	})
	start := time.Now()
	offset := b.headOffset(url, token)
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("HEAD took %s to get the upload handed over", took)
	}
	if offset <= 5<<20 || offset > sent {
		t.Fatalf("HEAD after the hand-over = %d, want what reached the gateway (over the 5 MiB part, at most %d)", offset, sent)
	}
	if r := first.wait(t, 5*time.Second); r.status != 0 {
		expectTus(t, r, http.StatusBadRequest)
	}
	r := b.patch(url, token, offset, content[offset:])
	expectTus(t, r, http.StatusNoContent)
	f := a.do("GET", "/api/v1/packages/"+p["id"].(string), token, nil).json(t)["files"].([]any)[0].(map[string]any)
	if f["sha256"] != sha(content) || f["id"] != r.header.Get("Shipfile-File-Id") {
		t.Fatalf("file after the hand-over = %v", f)
	}
	if n := a.incompleteUploads(); n != 0 {
		t.Fatalf("%d incomplete multipart uploads left", n)
	}
}

// TestTusSecondPatchTakesOver: a second PATCH while one runs asks it to let go and
// goes on: it never gets 423 (its offset is checked against what the first stored).
func TestTusSecondPatchTakesOver(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig(), withTusLease(30*time.Second, 5*time.Second))
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	content := randomBytes(t, 1<<20)
	url := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", token, len(content))

	first := a.startPatch(url, token, 0, len(content), content[:1000])
	servicetest.WaitFor(t, 10*time.Second, "the first PATCH to hold the upload", func() bool {
		_, _, owner := a.uploadRow(url)
		return owner != ""
	})
	start := time.Now()
	r := a.patch(url, token, 1000, content[1000:])
	expectTus(t, r, http.StatusNoContent)
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("the second PATCH took %s", took)
	}
	if r.header.Get("Shipfile-File-Id") == "" {
		t.Fatal("the second PATCH did not complete the upload")
	}
	if r := first.wait(t, 5*time.Second); r.status != 0 {
		expectTus(t, r, http.StatusBadRequest)
	}
}

// cutPatch sends a PATCH of content at offset whose connection is cut after n bytes
// of its body.
func (a *testAPI) cutPatch(url, token string, offset int, content []byte, n int) {
	a.t.Helper()
	req, err := http.NewRequest("PATCH", a.url+url, &brokenReader{data: content, n: n})
	if err != nil {
		a.t.Fatal(err)
	}
	req.ContentLength = int64(len(content))
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	req.Header.Set("Upload-Offset", strconv.Itoa(offset))
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := a.client(0).Do(req); err == nil {
		resp.Body.Close()
		a.t.Fatal("the cut PATCH succeeded")
	}
}

// TestTusCutPatchResumesAtOnce is a client's retry after a dropped connection: a PATCH
// cut after 24 MiB, a HEAD at once, then a PATCH from the offset it reports: 204, never
// 423 (the first PATCH may still be storing its tail when the HEAD comes; the HEAD
// waits for it).
func TestTusCutPatchResumesAtOnce(t *testing.T) {
	t.Parallel()
	cfg := tusConfig()
	cfg.MaxFileSize = 40 << 20
	a := newTestAPI(t, cfg, withTusLease(30*time.Second, 5*time.Second))
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	content := randomBytes(t, 32<<20)
	url := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", token, len(content))

	const sent = 24 << 20
	a.cutPatch(url, token, 0, content, sent)
	start := time.Now()
	offset := a.headOffset(url, token)
	if offset > sent || offset < sent-(5<<20) {
		t.Fatalf("HEAD right after the cut = %d; %d bytes were sent and at most a part may be lost", offset, sent)
	}
	r := a.patch(url, token, offset, content[offset:])
	expectTus(t, r, http.StatusNoContent)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("resuming took %s", took)
	}
	f := a.do("GET", "/api/v1/packages/"+p["id"].(string), token, nil).json(t)["files"].([]any)[0].(map[string]any)
	if f["sha256"] != sha(content) {
		t.Fatal("the resumed file's sha256 differs")
	}
}

// TestTusRefusedPatchIsAnswered: a PATCH refused before its body is read (here 409,
// a wrong offset) still gets its answer while the client sends its body: the gateway
// reads the body (up to a bound) instead of closing the connection under it, so the
// client sees the status, not a reset.
func TestTusRefusedPatchIsAnswered(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	content := randomBytes(t, 20<<20)
	url := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", token, len(content))

	conn, err := net.Dial("tcp", strings.TrimPrefix(a.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := fmt.Sprintf("PATCH %s HTTP/1.1\r\nHost: shipfile.test\r\nTus-Resumable: 1.0.0\r\n"+
		"Content-Type: application/offset+octet-stream\r\nUpload-Offset: 12345\r\nAuthorization: Bearer %s\r\n"+
		"Content-Length: %d\r\n\r\n", url, token, len(content))
	wrote := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, io.MultiReader(strings.NewReader(head), bytes.NewReader(content)))
		wrote <- err
	}()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to the refused PATCH: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), "detail") {
		t.Fatalf("refused PATCH = %d %s, want 409 with a detail", resp.StatusCode, b)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("the client's body was cut off: %v", err)
	}
}

// TestTusStrangerTakesNoLease: an upload URL's owner is checked before anything else:
// a stranger's PATCH (the package's admin, who did not create the upload) gets 404 at
// once, even while the owner's PATCH holds the upload, and neither takes nor asks for
// the lease; the owner's PATCH goes on undisturbed.
func TestTusStrangerTakesNoLease(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig(), withTusLease(30*time.Second, 5*time.Second))
	_, token := a.user("owner@example.com", app.RoleRegular)
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	content := randomBytes(t, 1<<20)
	url := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", token, len(content))

	expectTus(t, a.patch(url, admin, 0, content[:10]), http.StatusNotFound)
	if _, _, owner := a.uploadRow(url); owner != "" {
		t.Fatal("a stranger's PATCH left a lease")
	}
	running := a.startPatch(url, token, 0, len(content), content[:1000])
	var holder string
	servicetest.WaitFor(t, 10*time.Second, "the owner's PATCH to hold the upload", func() bool {
		_, _, holder = a.uploadRow(url)
		return holder != ""
	})
	start := time.Now()
	expectTus(t, a.patch(url, admin, 0, content[:10]), http.StatusNotFound)
	expectTus(t, a.tusDo("DELETE", url, admin, nil), http.StatusNotFound)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the stranger's requests took %s", took)
	}
	var asked bool
	if err := a.pool.QueryRow(context.Background(), `SELECT release_asked IS NOT NULL FROM tus_uploads`).Scan(&asked); err != nil {
		t.Fatal(err)
	}
	if _, _, owner := a.uploadRow(url); owner != holder || asked {
		t.Fatalf("the stranger's PATCH touched the lease: owner %q (was %q), asked %v", owner, holder, asked)
	}
	if _, err := running.body.Write(content[1000:]); err != nil {
		t.Fatal(err)
	}
	running.body.Close()
	if r := running.wait(t, 10*time.Second); r.status != http.StatusNoContent || r.header.Get("Shipfile-File-Id") == "" {
		t.Fatalf("the owner's PATCH = %d %s", r.status, r.body)
	}
}

// TestTusLostLeaseStopsWriting: a PATCH whose lease renewal finds the lease gone
// (here taken by another owner behind its back) stops at once: no part and no tail is
// stored after that, and the saved state is left as the new holder has it.
func TestTusLostLeaseStopsWriting(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig()) // lease 2 s: renewed every ~0.7 s
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	content := randomBytes(t, 12<<20)
	url := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", token, len(content))

	running := a.startPatch(url, token, 0, len(content), content[:6<<20])
	servicetest.WaitFor(t, 10*time.Second, "the PATCH to store its first part", func() bool {
		off, _, _ := a.uploadRow(url)
		return off == 5<<20
	})
	if _, err := a.pool.Exec(context.Background(), `UPDATE tus_uploads SET lock_owner = gen_random_uuid(), lock_until = now() + interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	r := running.wait(t, 5*time.Second)
	if r.status != 0 && r.status != http.StatusLocked {
		t.Fatalf("the PATCH that lost its lease = %d %s", r.status, r.body)
	}
	off, parts, _ := a.uploadRow(url)
	if off != 5<<20 || parts != 1 {
		t.Fatalf("after the lost lease: offset %d, %d parts; want 5 MiB and 1", off, parts)
	}
	var keys []string
	for o := range a.objects.Client.ListObjects(context.Background(), a.objects.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		keys = append(keys, o.Key)
	}
	if len(keys) != 0 {
		t.Fatalf("a tail was stored after the lease was lost: %v", keys)
	}
}

// TestTusOpenUploadLimits: unfinished uploads count toward the package's file limit
// (5 in the tests; a tus creation and a multipart upload are refused at it), and a token, a link or a browser user has at most
// SHIPFILE_UPLOAD_MAX_OPEN unfinished at once (429 with Retry-After and a detail);
// finishing or ending one makes room.
func TestTusOpenUploadLimits(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig(), withMaxOpen(2))
	u, token := a.user("owner@example.com", app.RoleRegular)
	_, other, err := a.identity.CreateToken(context.Background(), u.ID, "second", nil, identity.System)
	if err != nil {
		t.Fatal(err)
	}
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	creation := "/api/v1/packages/" + p["id"].(string) + "/uploads"
	create := func(token string) response {
		return a.tusDo("POST", creation, token, nil, "Upload-Length", "10", "Upload-Metadata", meta("a.bin"))
	}
	first := a.tusCreate(creation, token, 10)
	a.tusCreate(creation, token, 10)
	r := create(token)
	expectTus(t, r, http.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// Per token: the user's other token has its own count.
	a.tusCreate(creation, other, 10)
	// Finishing one makes room.
	expectTus(t, a.patch(first, token, 0, []byte("0123456789")), http.StatusNoContent)
	fourth := a.tusCreate(creation, token, 10)
	// The package: 1 file + 3 unfinished; one more reaches its limit of 5 files.
	a.tusCreate(creation, other, 10)
	expectTus(t, create(other), http.StatusConflict)
	expect(t, a.upload("/api/v1/packages/"+p["id"].(string)+"/files", token, "b.txt", []byte("b")), http.StatusConflict) // multipart too
	expectTus(t, a.tusDo("DELETE", fourth, token, nil), http.StatusNoContent)
	a.tusCreate(creation, token, 10)

	// A link: at most 2 unfinished too.
	in := a.createPackage(token, map[string]any{"title": "In", "recipient_email": "r@example.com", "direction": "inbound"})
	fr := a.do("POST", "/api/v1/packages/"+in["id"].(string)+"/finalize", token, nil)
	expect(t, fr, http.StatusOK)
	link := "/api/v1/links/" + linkToken(t, fr.json(t)["magic_link"]) + "/uploads"
	a.tusCreate(link, "", 10)
	a.tusCreate(link, "", 10)
	r = a.tusDo("POST", link, "", nil, "Upload-Length", "10", "Upload-Metadata", meta("a.bin"))
	expectTus(t, r, http.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
}

// TestUploadsInFlightPerUser: the limit of uploads in flight counts per user too: a
// user at the limit with one token gets 429 with another.
func TestUploadsInFlightPerUser(t *testing.T) {
	t.Parallel()
	cfg := tusConfig()
	cfg.Uploads = httpapi.UploadLimits{MaxConcurrent: 8, PerClient: 1}
	a := newTestAPI(t, cfg)
	u, token := a.user("owner@example.com", app.RoleRegular)
	_, other, err := a.identity.CreateToken(context.Background(), u.ID, "second", nil, identity.System)
	if err != nil {
		t.Fatal(err)
	}
	_, stranger := a.user("stranger@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	first := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", token, 2000)
	second := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", other, 10)
	q := a.createPackage(stranger, map[string]any{"title": "S", "recipient_email": "r@example.com"})
	third := a.tusCreate("/api/v1/packages/"+q["id"].(string)+"/uploads", stranger, 10)

	running := a.startPatch(first, token, 0, 2000, make([]byte, 1000))
	servicetest.WaitFor(t, 10*time.Second, "the first PATCH to hold its upload", func() bool {
		_, _, owner := a.uploadRow(first)
		return owner != ""
	})
	r := a.patch(second, other, 0, []byte("0123456789"))
	expectTus(t, r, http.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	expectTus(t, a.patch(third, stranger, 0, []byte("0123456789")), http.StatusNoContent) // another user is not counted
	if _, err := running.body.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	running.body.Close()
	if r := running.wait(t, 10*time.Second); r.status != http.StatusNoContent {
		t.Fatalf("the first PATCH = %d", r.status)
	}
	expectTus(t, a.patch(second, other, 0, []byte("0123456789")), http.StatusNoContent)
}

// TestTusUnreachableHolder: 423 is left for a holder that cannot be reached (here a
// lease in the row that no gateway runs, as after a killed instance): a PATCH waits
// SHIPFILE_UPLOAD_LOCK_WAIT, then gets 423 with a detail; a HEAD answers the saved
// offset after that wait; once the lease lapses the PATCH goes on.
func TestTusUnreachableHolder(t *testing.T) {
	t.Parallel()
	const wait = 300 * time.Millisecond
	a := newTestAPI(t, tusConfig(), withTusLease(2*time.Second, wait))
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	url := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", token, 10)
	expectTus(t, a.patch(url, token, 0, []byte("01234")), http.StatusNoContent)
	if _, err := a.pool.Exec(context.Background(), `UPDATE tus_uploads SET lock_owner = gen_random_uuid(), lock_until = now() + interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := a.patch(url, token, 5, []byte("56789"))
	expect(t, r, http.StatusLocked)
	if took := time.Since(start); took < wait {
		t.Fatalf("423 after %s, before the lock wait of %s", took, wait)
	}
	start = time.Now()
	if off := a.headOffset(url, token); off != 5 {
		t.Fatalf("HEAD = %d, want the saved 5", off)
	}
	if took := time.Since(start); took < wait {
		t.Fatalf("HEAD answered after %s, without asking the holder", took)
	}
	if _, err := a.pool.Exec(context.Background(), `UPDATE tus_uploads SET lock_until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	r = a.patch(url, token, 5, []byte("56789"))
	expectTus(t, r, http.StatusNoContent)
	if r.header.Get("Shipfile-File-Id") == "" {
		t.Fatal("the upload did not complete once the lease lapsed")
	}
}
