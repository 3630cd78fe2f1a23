package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // the tus checksum extension's algorithm
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
	"github.com/shipfile/shipfile/services/gateway/internal/app/transfers"
	"github.com/shipfile/shipfile/services/gateway/internal/app/webhookadmin"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
	"github.com/shipfile/shipfile/services/gateway/internal/store/identitydb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/linksdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/transfersdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/webhookadmindb"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/httpapi"
)

// tusConfig is a test gateway whose files may span several 5 MiB parts.
func tusConfig() httpapi.Config {
	c := defaultConfig()
	c.MaxFileSize = 24 << 20
	return c
}

// tusDo sends a tus request (Tus-Resumable: 1.0.0 unless headers set it to "").
func (a *testAPI) tusDo(method, url, token string, body io.Reader, headers ...string) response {
	a.t.Helper()
	if !strings.HasPrefix(url, "http") {
		url = a.url + url
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Tus-Resumable", "1.0.0")
	if body != nil {
		req.Header.Set("Content-Type", "application/offset+octet-stream")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := a.client(60 * time.Second).Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func meta(filename string) string {
	return "filename " + base64.StdEncoding.EncodeToString([]byte(filename)) + ",filetype " + base64.StdEncoding.EncodeToString([]byte("text/plain"))
}

// tusCreate creates an upload and returns its URL.
func (a *testAPI) tusCreate(creation, token string, length int) string {
	a.t.Helper()
	r := a.tusDo("POST", creation, token, nil, "Upload-Length", strconv.Itoa(length), "Upload-Metadata", meta("big.bin"))
	expectTus(a.t, r, http.StatusCreated)
	loc := r.header.Get("Location")
	if !strings.HasPrefix(loc, creation+"/") {
		a.t.Fatalf("Location = %q, want under %s", loc, creation)
	}
	if _, err := http.ParseTime(r.header.Get("Upload-Expires")); err != nil {
		a.t.Fatalf("Upload-Expires = %q: %v", r.header.Get("Upload-Expires"), err)
	}
	return loc
}

// patch sends one chunk at offset and returns the answer.
func (a *testAPI) patch(url, token string, offset int, chunk []byte, headers ...string) response {
	a.t.Helper()
	return a.tusDo("PATCH", url, token, bytes.NewReader(chunk), append([]string{"Upload-Offset", strconv.Itoa(offset)}, headers...)...)
}

// headOffset answers HEAD and returns Upload-Offset.
func (a *testAPI) headOffset(url, token string) int {
	a.t.Helper()
	r := a.tusDo("HEAD", url, token, nil)
	if r.status != http.StatusOK {
		a.t.Fatalf("HEAD %s = %d", url, r.status)
	}
	if r.header.Get("Cache-Control") != "no-store" || r.header.Get("Tus-Resumable") != "1.0.0" {
		a.t.Fatalf("HEAD headers: %v", r.header)
	}
	n, err := strconv.Atoi(r.header.Get("Upload-Offset"))
	if err != nil {
		a.t.Fatalf("Upload-Offset = %q", r.header.Get("Upload-Offset"))
	}
	return n
}

// expectTus is expect plus the header every tus answer carries.
func expectTus(t testing.TB, r response, want int) {
	t.Helper()
	if r.header.Get("Tus-Resumable") != "1.0.0" {
		t.Fatalf("answer %d without Tus-Resumable: %v", r.status, r.header)
	}
	if want >= 400 && want != 460 && want != 423 && len(r.body) > 0 {
		expect(t, r, want)
		return
	}
	if r.status != want {
		t.Fatalf("status = %d, want %d; body: %s", r.status, want, r.body)
	}
}

// incompleteUploads counts the bucket's incomplete multipart uploads.
func (a *testAPI) incompleteUploads() int {
	a.t.Helper()
	n := 0
	for u := range a.objects.Client.ListIncompleteUploads(context.Background(), a.objects.Bucket, "", true) {
		if u.Err != nil {
			a.t.Fatal(u.Err)
		}
		n++
	}
	return n
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func checksumHeader(alg string, chunk []byte) string {
	var sum []byte
	switch alg {
	case "sha1":
		s := sha1.Sum(chunk) //nolint:gosec // tus checksum
		sum = s[:]
	default:
		s := sha256.Sum256(chunk)
		sum = s[:]
	}
	return alg + " " + base64.StdEncoding.EncodeToString(sum)
}

func TestTusOptions(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "In", "recipient_email": "r@example.com", "direction": "inbound"})
	r := a.do("POST", "/api/v1/packages/"+p["id"].(string)+"/finalize", token, nil)
	expect(t, r, http.StatusOK)
	link := linkToken(t, r.json(t)["magic_link"])
	// A dead link answers 410 first, as on every link route.
	expectTus(t, a.tusDo("OPTIONS", "/api/v1/links/"+strings.Repeat("x", 43)+"/uploads", "", nil, "Tus-Resumable", ""), http.StatusGone)
	for _, path := range []string{"/api/v1/packages/" + fmt.Sprint(1) + "/uploads", "/api/v1/links/" + link + "/uploads"} {
		r := a.tusDo("OPTIONS", path, "", nil, "Tus-Resumable", "")
		if r.status != http.StatusNoContent {
			t.Fatalf("OPTIONS %s = %d %s", path, r.status, r.body)
		}
		want := map[string]string{
			"Tus-Resumable": "1.0.0", "Tus-Version": "1.0.0",
			"Tus-Extension":          "creation,creation-with-upload,termination,expiration,checksum",
			"Tus-Max-Size":           strconv.Itoa(24 << 20),
			"Tus-Checksum-Algorithm": "sha1,sha256",
		}
		for k, v := range want {
			if got := r.header.Get(k); got != v {
				t.Errorf("OPTIONS %s: %s = %q, want %q", path, k, got, v)
			}
		}
		// A method tus does not use is 405, and still carries Tus-Resumable.
		expectTus(t, a.tusDo("PUT", path+"/01a20bb6-d59d-7d69-bbb0-8082198c1f38", "", nil), http.StatusMethodNotAllowed)
	}
}

// TestTusProtocol drives an owner's upload through every answer of the protocol, in
// chunks that leave tails shorter than S3's minimum part and chunks that span parts.
func TestTusProtocol(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "Big", "recipient_email": "r@example.com"})
	creation := "/api/v1/packages/" + p["id"].(string) + "/uploads"

	// Creation errors.
	r := a.tusDo("POST", creation, token, nil, "Tus-Resumable", "", "Upload-Length", "10", "Upload-Metadata", meta("a.txt"))
	expectTus(t, r, http.StatusPreconditionFailed)
	if r.header.Get("Tus-Version") != "1.0.0" {
		t.Fatalf("412 without Tus-Version: %v", r.header)
	}
	expectTus(t, a.tusDo("POST", creation, token, nil, "Upload-Metadata", meta("a.txt")), http.StatusBadRequest)
	expectTus(t, a.tusDo("POST", creation, token, nil, "Upload-Length", strconv.Itoa(24<<20+1), "Upload-Metadata", meta("a.txt")), http.StatusRequestEntityTooLarge)
	expectTus(t, a.tusDo("POST", creation, token, nil, "Upload-Length", "10"), http.StatusUnprocessableEntity)
	expectTus(t, a.tusDo("POST", creation, token, nil, "Upload-Length", "10", "Upload-Metadata", meta("../etc/passwd")), http.StatusUnprocessableEntity)
	expectTus(t, a.tusDo("POST", creation, token, nil, "Upload-Length", "10", "Upload-Metadata", "filename %%%"), http.StatusUnprocessableEntity)
	expectTus(t, a.tusDo("POST", creation, "", nil, "Upload-Length", "10", "Upload-Metadata", meta("a.txt")), http.StatusUnauthorized)

	content := randomBytes(t, 13<<20+12345)
	url := a.tusCreate(creation, token, len(content))
	if got := a.headOffset(url, token); got != 0 {
		t.Fatalf("fresh upload offset = %d", got)
	}
	// PATCH errors change nothing.
	expectTus(t, a.patch(url, token, 0, content[:10], "Content-Type", "application/octet-stream"), http.StatusUnsupportedMediaType)
	expectTus(t, a.patch(url, token, 5, content[:10]), http.StatusConflict)
	expectTus(t, a.patch(url, token, 0, content[:10], "Tus-Resumable", ""), http.StatusPreconditionFailed)
	expectTus(t, a.patch(url, token, 0, content[:10], "Upload-Checksum", "md5 AAAA"), http.StatusBadRequest)

	// Chunks: 3 MiB (a tail), 4 MiB (tail + chunk fill a part, the rest is a tail), a
	// bad checksum (discarded), then sha1- and sha256-checked chunks, and the rest.
	cuts := []int{0, 3 << 20, 7 << 20, 7<<20 + 100, 12 << 20, len(content)}
	for i := 0; i+1 < len(cuts); i++ {
		chunk := content[cuts[i]:cuts[i+1]]
		var headers []string
		switch i {
		case 2:
			bad := append([]byte(nil), chunk...)
			bad[0] ^= 1
			expectTus(t, a.patch(url, token, cuts[i], chunk, "Upload-Checksum", checksumHeader("sha1", bad)), 460)
			if got := a.headOffset(url, token); got != cuts[i] {
				t.Fatalf("after a checksum mismatch offset = %d, want %d", got, cuts[i])
			}
			headers = []string{"Upload-Checksum", checksumHeader("sha1", chunk)}
		case 3:
			headers = []string{"Upload-Checksum", checksumHeader("sha256", chunk)}
		}
		r := a.patch(url, token, cuts[i], chunk, headers...)
		expectTus(t, r, http.StatusNoContent)
		if got := r.header.Get("Upload-Offset"); got != strconv.Itoa(cuts[i+1]) {
			t.Fatalf("chunk %d: Upload-Offset = %s, want %d", i, got, cuts[i+1])
		}
		if i == 0 && a.incompleteUploads() != 0 {
			t.Fatal("a first PATCH shorter than a part started a multipart upload")
		}
		if i+2 < len(cuts) {
			if got := a.headOffset(url, token); got != cuts[i+1] {
				t.Fatalf("chunk %d: HEAD offset = %d, want %d", i, got, cuts[i+1])
			}
			if r.header.Get("Shipfile-File-Id") != "" {
				t.Fatal("an unfinished upload names a file")
			}
		} else {
			fileID := r.header.Get("Shipfile-File-Id")
			if fileID == "" {
				t.Fatal("the completing PATCH has no Shipfile-File-Id")
			}
			h := a.tusDo("HEAD", url, token, nil)
			if h.header.Get("Shipfile-File-Id") != fileID || h.header.Get("Upload-Offset") != strconv.Itoa(len(content)) {
				t.Fatalf("HEAD after completion: %v", h.header)
			}
			expectTus(t, a.patch(url, token, len(content), nil), http.StatusConflict)
			expectTus(t, a.tusDo("DELETE", url, token, nil), http.StatusConflict)
			d := a.do("GET", "/api/v1/packages/"+p["id"].(string), token, nil).json(t)
			files := d["files"].([]any)
			f := files[0].(map[string]any)
			if len(files) != 1 || f["id"] != fileID || f["sha256"] != sha(content) || f["size"] != float64(len(content)) ||
				f["filename"] != "big.bin" || f["content_type"] != "text/plain" || f["uploaded_by"] != "owner" || d["file_count"] != float64(1) {
				t.Fatalf("package after the upload: %v", d)
			}
			dl := a.do("GET", "/api/v1/packages/"+p["id"].(string)+"/files/"+fileID+"/content", token, nil)
			if !bytes.Equal(dl.body, content) {
				t.Fatal("the downloaded file differs")
			}
		}
	}
	var events int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE subject = 'shipfile.events.package.file_uploaded'`).Scan(&events); err != nil || events != 1 {
		t.Fatalf("package.file_uploaded rows = %d (%v), want 1", events, err)
	}
	var audits int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'file.upload' AND package_id = $1 AND file_id IS NOT NULL`, p["id"]).Scan(&audits); err != nil || audits != 1 {
		t.Fatalf("file.upload audit entries = %d (%v), want 1", audits, err)
	}
	if n := a.incompleteUploads(); n != 0 {
		t.Fatalf("incomplete multipart uploads = %d", n)
	}
	if keys := a.objectKeys(); len(keys) != 1 {
		t.Fatalf("objects = %v, want the file alone (no tails)", keys)
	}
	if n := a.rowCount("object_reservations"); n != 0 {
		t.Fatalf("object reservations left = %d; the file's commit ends its reservation", n)
	}
}

func TestTusCreationWithUpload(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	creation := "/api/v1/packages/" + p["id"].(string) + "/uploads"

	// The whole file in the creation request.
	content := []byte("hello, tus")
	r := a.tusDo("POST", creation, token, bytes.NewReader(content), "Upload-Length", strconv.Itoa(len(content)), "Upload-Metadata", meta("hello.txt"))
	expectTus(t, r, http.StatusCreated)
	if r.header.Get("Upload-Offset") != strconv.Itoa(len(content)) || r.header.Get("Shipfile-File-Id") == "" || r.header.Get("Location") == "" {
		t.Fatalf("creation with the whole file: %v", r.header)
	}
	// Part of it: 201 with the offset reached.
	r = a.tusDo("POST", creation, token, bytes.NewReader(content[:4]), "Upload-Length", strconv.Itoa(len(content)), "Upload-Metadata", meta("part.txt"))
	expectTus(t, r, http.StatusCreated)
	if r.header.Get("Upload-Offset") != "4" || r.header.Get("Shipfile-File-Id") != "" {
		t.Fatalf("creation with part of the file: %v", r.header)
	}
	url := r.header.Get("Location")
	r = a.patch(url, token, 4, content[4:])
	expectTus(t, r, http.StatusNoContent)
	// An empty file is complete at creation.
	r = a.tusDo("POST", creation, token, nil, "Upload-Length", "0", "Upload-Metadata", meta("empty.txt"))
	expectTus(t, r, http.StatusCreated)
	if r.header.Get("Shipfile-File-Id") == "" {
		t.Fatalf("an empty upload is not complete at creation: %v", r.header)
	}
	d := a.do("GET", "/api/v1/packages/"+p["id"].(string), token, nil).json(t)
	if d["file_count"] != float64(3) {
		t.Fatalf("files = %v", d["file_count"])
	}
}

// TestTusTerminationAndExpiry: DELETE removes what was stored; an upload past its
// resume window answers 404 and the sweep removes its parts; deleting or revoking the
// package ends its uploads at once.
func TestTusTerminationAndExpiry(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	content := randomBytes(t, 12<<20)
	started := func(pkg string) string {
		url := a.tusCreate("/api/v1/packages/"+pkg+"/uploads", token, len(content))
		expectTus(t, a.patch(url, token, 0, content[:7<<20]), http.StatusNoContent)
		if a.incompleteUploads() == 0 || len(a.objectKeys()) == 0 {
			t.Fatal("a started upload has no multipart upload or tail")
		}
		return url
	}
	clean := func(what string) {
		t.Helper()
		if n := a.incompleteUploads(); n != 0 {
			t.Fatalf("%s: incomplete multipart uploads = %d", what, n)
		}
		if keys := a.objectKeys(); len(keys) != 0 {
			t.Fatalf("%s: objects left = %v", what, keys)
		}
		if n := a.rowCount("tus_uploads"); n != 0 {
			t.Fatalf("%s: upload rows = %d", what, n)
		}
	}
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	pkg := p["id"].(string)

	url := started(pkg)
	expectTus(t, a.tusDo("DELETE", url, token, nil), http.StatusNoContent)
	expectTus(t, a.tusDo("HEAD", url, token, nil), http.StatusNotFound)
	clean("terminated")

	url = started(pkg)
	if _, err := a.pool.Exec(context.Background(), `UPDATE tus_uploads SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	expectTus(t, a.tusDo("HEAD", url, token, nil), http.StatusNotFound)
	expectTus(t, a.patch(url, token, 7<<20, content[7<<20:]), http.StatusNotFound)
	if n, err := a.resumable.Sweep(context.Background()); err != nil || n != 1 {
		t.Fatalf("sweep ended %d (%v), want 1", n, err)
	}
	clean("expired")

	started(pkg)
	expect(t, a.do("DELETE", "/api/v1/packages/"+pkg, token, nil), http.StatusNoContent)
	clean("package deleted")

	// The package expires (the expiry service marks it): the URL dies at once, the
	// sweep removes the parts.
	p = a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	pkg = p["id"].(string)
	url = started(pkg)
	if _, err := a.pool.Exec(context.Background(), `UPDATE packages SET state = 'expired' WHERE id = $1`, pkg); err != nil {
		t.Fatal(err)
	}
	if r := a.tusDo("HEAD", url, token, nil); r.status < 400 {
		t.Fatalf("HEAD on an expired package's upload = %d", r.status)
	}
	if _, err := a.resumable.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	clean("package expired")
}

// TestTusOwnership: an upload URL belongs to its package and its creator.
func TestTusOwnership(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, owner := a.user("owner@example.com", app.RoleRegular)
	_, other := a.user("other@example.com", app.RoleRegular)
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	p := a.createPackage(owner, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	q := a.createPackage(owner, map[string]any{"title": "U", "recipient_email": "r@example.com"})
	url := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", owner, 10)
	id := url[strings.LastIndex(url, "/")+1:]

	if r := a.tusDo("HEAD", url, other, nil); r.status != http.StatusForbidden && r.status != http.StatusNotFound {
		t.Fatalf("another user's HEAD = %d", r.status)
	}
	expectTus(t, a.patch(url, other, 0, []byte("x")), http.StatusForbidden)
	expectTus(t, a.tusDo("HEAD", url, admin, nil), http.StatusNotFound) // not its creator
	expectTus(t, a.tusDo("HEAD", "/api/v1/packages/"+q["id"].(string)+"/uploads/"+id, owner, nil), http.StatusNotFound)
	expectTus(t, a.tusDo("HEAD", "/api/v1/packages/"+p["id"].(string)+"/uploads/nope", owner, nil), http.StatusNotFound)

	// The recipient's side: an inbound package's link; another link's URL is not found.
	in := func() (string, string) {
		p := a.createPackage(owner, map[string]any{"title": "In", "recipient_email": "r@example.com", "direction": "inbound"})
		r := a.do("POST", "/api/v1/packages/"+p["id"].(string)+"/finalize", owner, nil)
		expect(t, r, http.StatusOK)
		return p["id"].(string), linkToken(t, r.json(t)["magic_link"])
	}
	pkg1, link1 := in()
	_, link2 := in()
	content := []byte("from the recipient")
	rurl := a.tusCreate("/api/v1/links/"+link1+"/uploads", "", len(content))
	rid := rurl[strings.LastIndex(rurl, "/")+1:]
	expectTus(t, a.tusDo("HEAD", "/api/v1/links/"+link2+"/uploads/"+rid, "", nil), http.StatusNotFound)
	expectTus(t, a.tusDo("HEAD", "/api/v1/packages/"+pkg1+"/uploads/"+rid, owner, nil), http.StatusNotFound)
	r := a.patch(rurl, "", 0, content)
	expectTus(t, r, http.StatusNoContent)
	f := a.do("GET", "/api/v1/packages/"+pkg1, owner, nil).json(t)["files"].([]any)[0].(map[string]any)
	if f["uploaded_by"] != "recipient" || f["sha256"] != sha(content) || f["id"] != r.header.Get("Shipfile-File-Id") {
		t.Fatalf("recipient's file = %v", f)
	}
	expectTus(t, a.tusDo("POST", "/api/v1/links/"+strings.Repeat("A", 43)+"/uploads", "", nil, "Upload-Length", "1", "Upload-Metadata", meta("a")), http.StatusGone)
}

// TestTusStateCheckedAtCompletion: a package finalized while its upload ran keeps no
// object of it.
func TestTusStateCheckedAtCompletion(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com", "direction": "inbound"})
	base := "/api/v1/packages/" + p["id"].(string)
	content := randomBytes(t, 6<<20)
	url := a.tusCreate(base+"/uploads", token, len(content))
	expectTus(t, a.patch(url, token, 0, content[:1<<20]), http.StatusNoContent)
	expect(t, a.do("POST", base+"/finalize", token, nil), http.StatusOK)
	expectTus(t, a.patch(url, token, 1<<20, content[1<<20:]), http.StatusConflict)
	if _, err := a.resumable.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if keys := a.objectKeys(); len(keys) != 0 || a.incompleteUploads() != 0 {
		t.Fatalf("objects left = %v", keys)
	}
}

// brokenReader yields n bytes of data and then fails.
type brokenReader struct {
	data []byte
	n    int
}

func (b *brokenReader) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errors.New("network drop")
	}
	if len(p) > b.n {
		p = p[:b.n]
	}
	m := copy(p, b.data)
	b.data, b.n = b.data[m:], b.n-m
	return m, nil
}

// TestTusBrokenPatchResumes: a PATCH that breaks midway keeps what reached the
// gateway; the client asks HEAD and goes on, here on a second gateway instance.
func TestTusBrokenPatchResumes(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	b := a.secondInstance()
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	content := randomBytes(t, 14<<20)
	url := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", token, len(content))

	const sent = 9<<20 + 777
	req, err := http.NewRequest("PATCH", a.url+url, &brokenReader{data: content, n: sent})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(content))
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	req.Header.Set("Upload-Offset", "0")
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := a.client(0).Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the broken PATCH succeeded")
	}
	// The gateway notices the broken body on its own time: poll HEAD on the other
	// instance until the lease is given back and the offset is saved.
	var offset int
	deadline := time.Now().Add(10 * time.Second)
	for {
		offset = b.headOffset(url, token)
		r := b.patch(url, token, offset, nil)
		if offset > 0 && r.status == http.StatusNoContent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offset after the broken PATCH = %d (last PATCH %d)", offset, r.status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if offset > sent || offset < sent-(5<<20) {
		t.Fatalf("offset = %d after %d bytes were sent; at most a part may be lost", offset, sent)
	}
	r := b.patch(url, token, offset, content[offset:])
	expectTus(t, r, http.StatusNoContent)
	f := a.do("GET", "/api/v1/packages/"+p["id"].(string), token, nil).json(t)["files"].([]any)[0].(map[string]any)
	if f["sha256"] != sha(content) {
		t.Fatal("the resumed file's sha256 differs")
	}
	if a.incompleteUploads() != 0 || len(a.objectKeys()) != 1 {
		t.Fatalf("left behind: %d incomplete uploads, objects %v", a.incompleteUploads(), a.objectKeys())
	}
}

// secondInstance is another gateway on the same database and bucket.
func (a *testAPI) secondInstance() *testAPI {
	a.t.Helper()
	db := store.NewPostgres(a.pool)
	objectStore := store.NewObjects(a.objects, 5<<20)
	cfg := tusConfig()
	packages := packages.NewPackages(db, objectStore, app.Limits{MaxFileSize: cfg.MaxFileSize, MaxFiles: 5}, "http://shipfile.test")
	linkService := links.New(packages, linksdb.NewStore(sqldb.NewDB(a.pool)), db)
	uploads := transfersdb.NewStore(sqldb.NewDB(a.pool), db)
	resumable := transfers.NewResumable(packages, linkService, uploads, objectStore, transfers.TusConfig{ResumeWindow: time.Hour, Lease: 2 * time.Second}, nil)
	// Its listener of asks to let go runs as in the gateway (service.Start); it stops
	// before the pool closes (cleanups run last first).
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		uploads.FollowUploadReleases(ctx, resumable.AskRelease, nil)
	}()
	a.t.Cleanup(func() {
		cancel()
		<-listening
	})
	engine, err := httpapi.New(httpapi.Deps{
		Log: slog.New(slog.DiscardHandler), Identity: identity.NewIdentity(identitydb.NewStore(sqldb.NewDB(a.pool))), Packages: packages, Links: linkService, Resumable: resumable,
		Webhooks: webhookadmin.New(webhookadmindb.NewStore(sqldb.NewDB(a.pool)), servicetest.Keyring(a.t), false), Registry: ops.NewRegistry(), Config: cfg,
	})
	if err != nil {
		a.t.Fatal(err)
	}
	srv := httptest.NewServer(engine)
	a.t.Cleanup(srv.Close)
	b := *a
	b.url, b.engine, b.resumable = srv.URL, engine, resumable
	return &b
}

// TestTusSweepAbortsOrphans: a multipart upload under tus/ that no upload row names (a
// gateway died between starting it and saving its id) is aborted once older than the
// grace; the upload of a live upload and other keys' uploads are left alone.
func TestTusSweepAbortsOrphans(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	content := randomBytes(t, 6<<20)
	url := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", token, len(content)+1)
	expectTus(t, a.patch(url, token, 0, content), http.StatusNoContent) // a live multipart upload

	core := minio.Core{Client: a.objects.Client}
	for _, key := range []string{"tus/orphan/file", "packages/other/file"} {
		if _, err := core.NewMultipartUpload(context.Background(), a.objects.Bucket, key, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.incompleteUploads(); n != 3 {
		t.Fatalf("incomplete uploads = %d, want 3", n)
	}
	db := store.NewPostgres(a.pool)
	objectStore := store.NewObjects(a.objects, 5<<20)
	packages := packages.NewPackages(db, objectStore, app.Limits{MaxFileSize: 24 << 20, MaxFiles: 5}, "http://shipfile.test")
	sweeper := transfers.NewResumable(packages, links.New(packages, linksdb.NewStore(sqldb.NewDB(a.pool)), db), transfersdb.NewStore(sqldb.NewDB(a.pool), db), objectStore, transfers.TusConfig{OrphanGrace: time.Nanosecond}, nil)
	time.Sleep(10 * time.Millisecond)
	if n, err := sweeper.Sweep(context.Background()); err != nil || n != 1 {
		t.Fatalf("sweep ended %d (%v), want the orphan alone", n, err)
	}
	var left []string
	for u := range a.objects.Client.ListIncompleteUploads(context.Background(), a.objects.Bucket, "", true) {
		left = append(left, u.Key)
	}
	if len(left) != 2 || slices.Contains(left, "tus/orphan/file") {
		t.Fatalf("incomplete uploads left = %v", left)
	}
	expectTus(t, a.patch(url, token, len(content), []byte("!")), http.StatusNoContent)
}

// TestTusRevokeEndsUploads: revoking an inbound package ends the recipient's unfinished
// uploads at once (nothing stays in the bucket) and the upload URL is dead.
func TestTusRevokeEndsUploads(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "In", "recipient_email": "r@example.com", "direction": "inbound"})
	base := "/api/v1/packages/" + p["id"].(string)
	r := a.do("POST", base+"/finalize", token, nil)
	expect(t, r, http.StatusOK)
	link := linkToken(t, r.json(t)["magic_link"])
	content := randomBytes(t, 12<<20)
	url := a.tusCreate("/api/v1/links/"+link+"/uploads", "", len(content))
	expectTus(t, a.patch(url, "", 0, content[:7<<20]), http.StatusNoContent)
	if a.incompleteUploads() != 1 || len(a.objectKeys()) != 1 {
		t.Fatalf("a started upload: %d incomplete uploads, objects %v", a.incompleteUploads(), a.objectKeys())
	}
	expect(t, a.do("POST", base+"/revoke", token, nil), http.StatusOK)
	if n, keys, rows := a.incompleteUploads(), a.objectKeys(), a.rowCount("tus_uploads"); n != 0 || len(keys) != 0 || rows != 0 {
		t.Fatalf("after revoke: %d incomplete uploads, objects %v, %d rows", n, keys, rows)
	}
	expectTus(t, a.tusDo("HEAD", url, "", nil), http.StatusGone)
	expectTus(t, a.patch(url, "", 7<<20, content[7<<20:]), http.StatusGone)
}

// TestTusProtectedLink: a password-protected link's upload routes need its grant.
func TestTusProtectedLink(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "In", "recipient_email": "r@example.com", "direction": "inbound", "password": "correct horse"})
	r := a.do("POST", "/api/v1/packages/"+p["id"].(string)+"/finalize", token, nil)
	expect(t, r, http.StatusOK)
	link := linkToken(t, r.json(t)["magic_link"])
	creation := "/api/v1/links/" + link + "/uploads"
	expectTus(t, a.tusDo("POST", creation, "", nil, "Upload-Length", "3", "Upload-Metadata", meta("a.txt")), http.StatusUnauthorized)
	r = a.do("POST", "/api/v1/links/"+link+"/unlock", "", map[string]any{"password": "correct horse"})
	expect(t, r, http.StatusOK)
	grant := r.json(t)["grant"].(string)
	r = a.tusDo("POST", creation, "", nil, "Upload-Length", "3", "Upload-Metadata", meta("a.txt"), "Shipfile-Link-Grant", grant)
	expectTus(t, r, http.StatusCreated)
	url := r.header.Get("Location")
	expectTus(t, a.patch(url, "", 0, []byte("abc")), http.StatusUnauthorized)
	r = a.patch(url, "", 0, []byte("abc"), "Shipfile-Link-Grant", grant)
	expectTus(t, r, http.StatusNoContent)
	if r.header.Get("Shipfile-File-Id") == "" {
		t.Fatal("the upload did not complete")
	}
}

// TestTusUploadLimits: a tus PATCH takes an upload slot like a multipart upload, so a
// client at its limit of uploads in flight gets 429 with Retry-After.
func TestTusUploadLimits(t *testing.T) {
	t.Parallel()
	cfg := tusConfig()
	cfg.Uploads = httpapi.UploadLimits{MaxConcurrent: 8, PerClient: 1}
	a := newTestAPI(t, cfg)
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	first := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", token, 2000)
	second := a.tusCreate("/api/v1/packages/"+p["id"].(string)+"/uploads", token, 10)

	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("PATCH", a.url+first, pr)
		req.ContentLength = 2000
		req.Header.Set("Tus-Resumable", "1.0.0")
		req.Header.Set("Content-Type", "application/offset+octet-stream")
		req.Header.Set("Upload-Offset", "0")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := a.client(0).Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	if _, err := pw.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	servicetest.WaitFor(t, 10*time.Second, "the first PATCH to hold its upload", func() bool {
		var held bool
		err := a.pool.QueryRow(context.Background(), `SELECT bool_or(lock_owner IS NOT NULL) FROM tus_uploads`).Scan(&held)
		return err == nil && held
	})
	r := a.patch(second, token, 0, []byte("0123456789"))
	expectTus(t, r, http.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	if _, err := pw.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if st := <-done; st != http.StatusNoContent {
		t.Fatalf("the first PATCH = %d", st)
	}
	expectTus(t, a.patch(second, token, 0, []byte("0123456789")), http.StatusNoContent)
}
