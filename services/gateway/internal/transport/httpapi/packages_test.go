package httpapi_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// upload posts content as the multipart part "file" named filename.
func (a *testAPI) upload(path, token, filename string, content []byte) response {
	a.t.Helper()
	return a.postFile(path, token, "comment", "a field before the file is skipped", filename, "text/plain", content)
}

// postFile posts a multipart form: the field name=value, then content as the part
// "file" named filename, of contentType.
func (a *testAPI) postFile(path, token, name, value, filename, contentType string, content []byte) response {
	a.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField(name, value)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, filename))
	h.Set("Content-Type", contentType)
	w, err := mw.CreatePart(h)
	if err != nil {
		a.t.Fatal(err)
	}
	_, _ = w.Write(content)
	_ = mw.Close()
	return a.do("POST", path, token, nil, "Content-Type", mw.FormDataContentType(), "X-Raw-Body", body.String())
}

func (a *testAPI) createPackage(token string, body map[string]any) map[string]any {
	a.t.Helper()
	r := a.do("POST", "/api/v1/packages", token, body)
	expect(a.t, r, http.StatusCreated)
	return r.json(a.t)
}

func (a *testAPI) rowCount(table string) int {
	a.t.Helper()
	var n int
	if err := a.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		a.t.Fatal(err)
	}
	return n
}

// linkToken is the token part of a magic link.
func linkToken(t *testing.T, link any) string {
	t.Helper()
	s, _ := link.(string)
	token, ok := strings.CutPrefix(s, "http://shipfile.test/p/")
	if !ok || len(token) != 43 {
		t.Fatalf("magic_link = %v, want http://shipfile.test/p/ + 43 characters", link)
	}
	return token
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestOutboundFlow(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	owner, token := a.user("owner@example.com", app.RoleRegular)

	p := a.createPackage(token, map[string]any{
		"title": "Q3 report", "recipient_email": "bob@example.com", "recipient_name": "Bob",
		"direction": "outbound", "ttl_days": 3, "note": "Here you go",
	})
	if p["state"] != "draft" || p["direction"] != "outbound" || p["ttl_days"] != float64(3) ||
		p["owner_user_id"] != float64(owner.ID) || p["file_count"] != float64(0) || p["finalized_at"] != nil {
		t.Fatalf("created = %v", p)
	}
	assertUTC(t, p["created_at"])
	assertUTC(t, p["expires_at"])
	id := p["id"].(string)
	base := "/api/v1/packages/" + id

	one := []byte("hello, world\n")
	two := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB, over one 5 MiB part? no: several reads
	r := a.upload(base+"/files", token, "hello.txt", one)
	expect(t, r, http.StatusCreated)
	f1 := r.json(t)
	if f1["filename"] != "hello.txt" || f1["size"] != float64(len(one)) || f1["sha256"] != sha(one) ||
		f1["uploaded_by"] != "owner" || f1["content_type"] != "text/plain" {
		t.Fatalf("file = %v", f1)
	}
	r = a.upload(base+"/files", token, "Straße €.bin", two)
	expect(t, r, http.StatusCreated)
	f2 := r.json(t)

	r = a.do("GET", base, token, nil)
	expect(t, r, http.StatusOK)
	detail := r.json(t)
	if detail["file_count"] != float64(2) || detail["total_size"] != float64(len(one)+len(two)) || len(detail["files"].([]any)) != 2 {
		t.Fatalf("detail = %v", detail)
	}
	for _, k := range []string{"object_key", "link_hash"} {
		if strings.Contains(string(r.body), k) {
			t.Fatalf("detail leaks %s", k)
		}
	}
	for _, key := range a.objectKeys() {
		if strings.Contains(key, "hello") || strings.Contains(key, "Stra") {
			t.Fatalf("object key %q contains the filename", key)
		}
	}

	// Owner download.
	r = a.do("GET", base+"/files/"+f1["id"].(string)+"/content", token, nil)
	expect(t, r, http.StatusOK)
	if !bytes.Equal(r.body, one) {
		t.Fatalf("owner download = %q", r.body)
	}

	r = a.do("POST", base+"/finalize", token, nil)
	expect(t, r, http.StatusOK)
	fin := r.json(t)
	if fin["state"] != "active" || fin["finalized_at"] == nil {
		t.Fatalf("finalized = %v", fin)
	}
	link := linkToken(t, fin["magic_link"])
	expect(t, a.do("POST", base+"/finalize", token, nil), http.StatusConflict)

	// The recipient's view.
	r = a.do("GET", "/api/v1/links/"+link, "", nil, "User-Agent", "recipient-agent/1.0")
	expect(t, r, http.StatusOK)
	view := r.json(t)
	if view["title"] != "Q3 report" || view["note"] != "Here you go" || len(view["files"].([]any)) != 2 {
		t.Fatalf("link view = %v", view)
	}
	if strings.Contains(string(r.body), "owner@example.com") {
		t.Fatal("the link view shows the owner's e-mail")
	}

	// A whole download.
	fileURL := "/api/v1/links/" + link + "/files/" + f2["id"].(string)
	r = a.do("GET", fileURL, "", nil)
	expect(t, r, http.StatusOK)
	if sha(r.body) != sha(two) {
		t.Fatal("downloaded bytes differ")
	}
	for h, want := range map[string]string{
		"Content-Disposition":    `attachment; filename="Stra_e _.bin"; filename*=UTF-8''Stra%C3%9Fe%20%E2%82%AC.bin`,
		"Content-Length":         fmt.Sprint(len(two)),
		"ETag":                   `"` + sha(two) + `"`,
		"X-Content-Type-Options": "nosniff",
		"Accept-Ranges":          "bytes",
	} {
		if got := r.header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}

	// Ranges.
	r = a.do("GET", fileURL, "", nil, "Range", "bytes=0-9")
	if r.status != http.StatusPartialContent || string(r.body) != string(two[:10]) {
		t.Fatalf("range 0-9: %d %q", r.status, r.body)
	}
	r = a.do("GET", fileURL, "", nil, "Range", "bytes=100-199")
	if r.status != http.StatusPartialContent || !bytes.Equal(r.body, two[100:200]) || r.header.Get("Content-Range") != fmt.Sprintf("bytes 100-199/%d", len(two)) {
		t.Fatalf("range 100-199: %d %s", r.status, r.header.Get("Content-Range"))
	}
	r = a.do("HEAD", fileURL, "", nil)
	if r.status != http.StatusOK || r.header.Get("Content-Length") != fmt.Sprint(len(two)) {
		t.Fatalf("HEAD: %d", r.status)
	}
	r = a.do("GET", fileURL, "", nil, "If-None-Match", `"`+sha(two)+`"`)
	if r.status != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d", r.status)
	}

	// The zip of all files.
	r = a.do("GET", "/api/v1/links/"+link+"/archive", "", nil)
	expect(t, r, http.StatusOK)
	zr, err := zip.NewReader(bytes.NewReader(r.body), int64(len(r.body)))
	if err != nil {
		t.Fatalf("archive: %v", err)
	}
	got := map[string]string{}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		got[zf.Name] = sha(b)
	}
	if len(got) != 2 || got["hello.txt"] != sha(one) || got["Straße €.bin"] != sha(two) {
		t.Fatalf("archive entries = %v", got)
	}
	if cd := r.header.Get("Content-Disposition"); !strings.Contains(cd, "Q3%20report.zip") {
		t.Fatalf("archive Content-Disposition = %q", cd)
	}

	// The HTML page.
	r = a.do("GET", "/p/"+link, "", nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "hello.txt") {
		t.Fatalf("recipient page: %d", r.status)
	}

	// Use count, audit.
	r = a.do("GET", base, token, nil)
	if n := r.json(t)["link_use_count"].(float64); n < 8 {
		t.Fatalf("link_use_count = %v, want every hit counted", n)
	}

	// Revoke: the link dies at once, with one generic answer.
	r = a.do("POST", base+"/revoke", token, nil)
	expect(t, r, http.StatusOK)
	if rv := r.json(t); rv["state"] != "revoked" || rv["revoked_at"] == nil {
		t.Fatalf("revoked = %v", rv)
	}
	gone := a.do("GET", "/api/v1/links/"+link, "", nil)
	expect(t, gone, http.StatusGone)
	unknown := a.do("GET", "/api/v1/links/"+strings.Repeat("x", 43), "", nil)
	expect(t, unknown, http.StatusGone)
	if string(gone.body) != string(unknown.body) {
		t.Fatalf("revoked and unknown links answer differently: %s vs %s", gone.body, unknown.body)
	}
	expect(t, a.do("GET", fileURL, "", nil), http.StatusGone)
	expect(t, a.do("GET", "/api/v1/links/"+link+"/archive", "", nil), http.StatusGone)
	if r := a.do("GET", "/p/"+link, "", nil); r.status != http.StatusGone || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("revoked page: %d %s", r.status, r.header.Get("Content-Type"))
	}
	expect(t, a.do("POST", base+"/revoke", token, nil), http.StatusConflict)

	// Admin audit log.
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	expect(t, a.do("GET", "/api/v1/admin/audit", token, nil), http.StatusForbidden)
	r = a.do("GET", "/api/v1/admin/audit?package_id="+id+"&limit=100", admin, nil)
	expect(t, r, http.StatusOK)
	var actions []string
	var sawAgent bool
	for _, it := range r.json(t)["items"].([]any) {
		e := it.(map[string]any)
		actions = append(actions, e["action"].(string))
		if e["user_agent"] == "recipient-agent/1.0" && e["ip"] == "127.0.0.1" && e["actor"] == "link" {
			sawAgent = true
		}
	}
	for _, want := range []string{"package.create", "file.upload", "package.finalize", "link.view", "file.download", "archive.download", "package.revoke"} {
		if !strings.Contains(strings.Join(actions, " "), want) {
			t.Errorf("audit lacks %s: %v", want, actions)
		}
	}
	if !sawAgent {
		t.Error("audit lacks the recipient's IP and user agent")
	}

	// Delete: gone for good, objects too.
	expect(t, a.do("DELETE", base, token, nil), http.StatusNoContent)
	expect(t, a.do("GET", base, token, nil), http.StatusNotFound)
	expect(t, a.do("DELETE", base, token, nil), http.StatusNotFound)
	if keys := a.objectKeys(); len(keys) != 0 {
		t.Fatalf("objects left after delete: %v", keys)
	}
	if n := a.rowCount("object_deletions"); n != 0 {
		t.Fatalf("%d object deletions still queued", n)
	}
}

func TestInboundFlow(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "Send me your invoices", "recipient_email": "supplier@example.com", "direction": "inbound"})
	base := "/api/v1/packages/" + p["id"].(string)
	if p["ttl_days"] != float64(7) || p["recipient_name"] != "" {
		t.Fatalf("defaults: %v", p)
	}

	r := a.do("POST", base+"/finalize", token, nil)
	expect(t, r, http.StatusOK)
	link := linkToken(t, r.json(t)["magic_link"])

	content := []byte("invoice 42")
	r = a.upload("/api/v1/links/"+link+"/files", "", "invoice.pdf", content)
	expect(t, r, http.StatusCreated)
	f := r.json(t)
	if f["uploaded_by"] != "recipient" || f["sha256"] != sha(content) {
		t.Fatalf("recipient file = %v", f)
	}
	r = a.do("GET", base, token, nil)
	if d := r.json(t); d["file_count"] != float64(1) || d["state"] != "active" {
		t.Fatalf("after recipient upload: %v", d)
	}
	r = a.do("GET", base+"/files/"+f["id"].(string)+"/content", token, nil)
	expect(t, r, http.StatusOK)
	if !bytes.Equal(r.body, content) {
		t.Fatalf("owner download = %q", r.body)
	}
	// The owner cannot add files to an active package; the page shows an upload form.
	expect(t, a.upload(base+"/files", token, "late.txt", []byte("x")), http.StatusConflict)
	if r := a.do("GET", "/p/"+link, "", nil); !strings.Contains(string(r.body), `type="file"`) {
		t.Fatal("inbound page has no upload form")
	}
	// Revoked: uploads stop.
	expect(t, a.do("POST", base+"/revoke", token, nil), http.StatusOK)
	expect(t, a.upload("/api/v1/links/"+link+"/files", "", "more.pdf", content), http.StatusGone)
	if n := len(a.objectKeys()); n != 1 {
		t.Fatalf("objects = %d, want 1", n)
	}
}

func TestDeadLinks(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	live := func() (string, string) {
		p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com", "direction": "inbound"})
		fin := a.do("POST", "/api/v1/packages/"+p["id"].(string)+"/finalize", token, nil).json(t)
		return p["id"].(string), linkToken(t, fin["magic_link"])
	}
	expiredID, expired := live()
	if _, err := a.pool.Exec(context.Background(), "UPDATE packages SET expires_at = now() - interval '1 second' WHERE id = $1", expiredID); err != nil {
		t.Fatal(err)
	}
	deletedID, deleted := live()
	expect(t, a.do("DELETE", "/api/v1/packages/"+deletedID, token, nil), http.StatusNoContent)
	_, ok := live()
	expect(t, a.do("GET", "/api/v1/links/"+ok, "", nil), http.StatusOK)

	var bodies []string
	for name, link := range map[string]string{"expired": expired, "deleted": deleted, "unknown": strings.Repeat("A", 43), "malformed": "short"} {
		r := a.do("GET", "/api/v1/links/"+link, "", nil)
		if r.status != http.StatusGone {
			t.Fatalf("%s link: %d", name, r.status)
		}
		bodies = append(bodies, string(r.body))
		expect(t, a.upload("/api/v1/links/"+link+"/files", "", "x.txt", []byte("x")), http.StatusGone)
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Fatalf("dead links answer differently: %q vs %q", b, bodies[0])
		}
	}
	if n := len(a.objectKeys()); n != 0 {
		t.Fatalf("uploads through dead links left %d objects", n)
	}
}

// TestExpiredPackage: once the expiry service has set a package expired (and deleted
// its objects), the owner still sees it and its files, but their bytes answer 409
// naming the state, like every other operation but delete.
func TestExpiredPackage(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	base := "/api/v1/packages/" + p["id"].(string)
	r := a.upload(base+"/files", token, "a.txt", []byte("hello"))
	expect(t, r, http.StatusCreated)
	fileID := r.json(t)["id"].(string)
	expect(t, a.do("POST", base+"/finalize", token, nil), http.StatusOK)
	if _, err := a.pool.Exec(context.Background(), "UPDATE packages SET state = 'expired' WHERE id = $1", p["id"]); err != nil {
		t.Fatal(err)
	}

	details := a.do("GET", base, token, nil)
	expect(t, details, http.StatusOK)
	if files, _ := details.json(t)["files"].([]any); len(files) != 1 {
		t.Fatalf("an expired package's files are still listed: %s", details.body)
	}
	r = a.do("GET", base+"/files/"+fileID+"/content", token, nil)
	expect(t, r, http.StatusConflict)
	if !strings.Contains(string(r.body), "expired") {
		t.Fatalf("409 without the state: %s", r.body)
	}
	expect(t, a.do("POST", base+"/revoke", token, nil), http.StatusConflict)
	expect(t, a.upload(base+"/files", token, "b.txt", []byte("b")), http.StatusConflict)
	expect(t, a.do("DELETE", base, token, nil), http.StatusNoContent)
}

// TestOverduePackage: once expires_at has passed, a package counts as expired before
// the expiry service marks it: its draft cannot be finalized nor its link used.
func TestOverduePackage(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	overdue := func(id string) {
		t.Helper()
		if _, err := a.pool.Exec(context.Background(), "UPDATE packages SET expires_at = now() - interval '1 second' WHERE id = $1", id); err != nil {
			t.Fatal(err)
		}
	}

	draft := a.createPackage(token, map[string]any{"title": "Draft", "recipient_email": "r@example.com"})
	base := "/api/v1/packages/" + draft["id"].(string)
	expect(t, a.upload(base+"/files", token, "a.txt", []byte("a")), http.StatusCreated)
	overdue(draft["id"].(string))
	r := a.do("POST", base+"/finalize", token, nil)
	expect(t, r, http.StatusConflict)
	if !strings.Contains(string(r.body), "state expired") {
		t.Fatalf("409 without the state: %s", r.body)
	}
	expect(t, a.upload(base+"/files", token, "b.txt", []byte("b")), http.StatusConflict)

	active := a.createPackage(token, map[string]any{"title": "Active", "recipient_email": "r@example.com"})
	base = "/api/v1/packages/" + active["id"].(string)
	expect(t, a.upload(base+"/files", token, "a.txt", []byte("a")), http.StatusCreated)
	r = a.do("POST", base+"/finalize", token, nil)
	expect(t, r, http.StatusOK)
	link := r.json(t)["magic_link"].(string)
	linkPath := "/api/v1/links/" + link[strings.LastIndex(link, "/")+1:]
	expect(t, a.do("GET", linkPath, "", nil), http.StatusOK)
	overdue(active["id"].(string))
	expect(t, a.do("GET", linkPath, "", nil), http.StatusGone)
	expect(t, a.do("POST", base+"/revoke", token, nil), http.StatusConflict)
}

func TestPackageRules(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	_, other := a.user("other@example.com", app.RoleRegular)
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	p := a.createPackage(token, map[string]any{"title": "Mine", "recipient_email": "r@example.com"})
	id := p["id"].(string)
	base := "/api/v1/packages/" + id
	f := a.upload(base+"/files", token, "a.txt", []byte("a")).json(t)
	fileID := f["id"].(string)

	t.Run("another user's package is forbidden", func(t *testing.T) {
		for _, req := range [][2]string{
			{"GET", base}, {"DELETE", base}, {"POST", base + "/finalize"}, {"POST", base + "/revoke"},
			{"GET", base + "/files/" + fileID + "/content"}, {"DELETE", base + "/files/" + fileID},
		} {
			expect(t, a.do(req[0], req[1], other, nil), http.StatusForbidden)
		}
		expect(t, a.upload(base+"/files", other, "b.txt", []byte("b")), http.StatusForbidden)
	})
	t.Run("admins may see it", func(t *testing.T) {
		expect(t, a.do("GET", base, admin, nil), http.StatusOK)
	})
	t.Run("unknown and malformed ids are not found", func(t *testing.T) {
		expect(t, a.do("GET", "/api/v1/packages/not-a-uuid", token, nil), http.StatusNotFound)
		expect(t, a.do("GET", "/api/v1/packages/00000000-0000-0000-0000-000000000000", token, nil), http.StatusNotFound)
		expect(t, a.do("GET", base+"/files/nope/content", token, nil), http.StatusNotFound)
		expect(t, a.do("GET", base+"/files/00000000-0000-0000-0000-000000000000/content", token, nil), http.StatusNotFound)
		expect(t, a.upload("/api/v1/packages/../files", token, "a.txt", []byte("a")), http.StatusNotFound)
		expect(t, a.upload("/api/v1/packages/not-a-uuid/files", token, "a.txt", []byte("a")), http.StatusNotFound)
	})
	t.Run("moves the state table forbids", func(t *testing.T) {
		empty := a.createPackage(token, map[string]any{"title": "Empty", "recipient_email": "r@example.com"})
		r := a.do("POST", "/api/v1/packages/"+empty["id"].(string)+"/finalize", token, nil)
		expect(t, r, http.StatusConflict)
		if !strings.Contains(string(r.body), "package has no files") {
			t.Fatalf("finalize empty: %s", r.body)
		}
		r = a.do("POST", base+"/revoke", token, nil)
		expect(t, r, http.StatusConflict)
		if !strings.Contains(string(r.body), "draft") {
			t.Fatalf("409 does not name the state: %s", r.body)
		}
		expect(t, a.do("POST", base+"/finalize", token, nil), http.StatusOK)
		r = a.do("DELETE", base+"/files/"+fileID, token, nil)
		expect(t, r, http.StatusConflict)
		if !strings.Contains(string(r.body), "active") {
			t.Fatalf("409 does not name the state: %s", r.body)
		}
		expect(t, a.upload(base+"/files", token, "b.txt", []byte("b")), http.StatusConflict)
	})
	t.Run("removing a file from a draft removes its object", func(t *testing.T) {
		d := a.createPackage(token, map[string]any{"title": "Draft", "recipient_email": "r@example.com"})
		dbase := "/api/v1/packages/" + d["id"].(string)
		before := len(a.objectKeys())
		f := a.upload(dbase+"/files", token, "x.txt", []byte("x")).json(t)
		expect(t, a.do("DELETE", dbase+"/files/"+f["id"].(string), token, nil), http.StatusNoContent)
		if after := len(a.objectKeys()); after != before {
			t.Fatalf("objects %d → %d", before, after)
		}
		if d := a.do("GET", dbase, token, nil).json(t); d["file_count"] != float64(0) || d["total_size"] != float64(0) {
			t.Fatalf("after remove: %v", d)
		}
	})
	t.Run("at most MaxFiles files", func(t *testing.T) {
		d := a.createPackage(token, map[string]any{"title": "Full", "recipient_email": "r@example.com"})
		dbase := "/api/v1/packages/" + d["id"].(string)
		for i := range 5 {
			expect(t, a.upload(dbase+"/files", token, fmt.Sprintf("%d.txt", i), []byte("x")), http.StatusCreated)
		}
		expect(t, a.upload(dbase+"/files", token, "6.txt", []byte("x")), http.StatusConflict)
	})
}

func TestCreatePackageRejectsBadInput(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	ok := func(extra map[string]any) map[string]any {
		m := map[string]any{"title": "T", "recipient_email": "r@example.com"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	cases := map[string]any{
		"malformed":            `{"title": "T",`,
		"title missing":        map[string]any{"recipient_email": "r@example.com"},
		"title empty":          ok(map[string]any{"title": ""}),
		"title too long":       ok(map[string]any{"title": strings.Repeat("t", 201)}),
		"title wrong type":     ok(map[string]any{"title": 1}),
		"email missing":        map[string]any{"title": "T"},
		"email invalid":        ok(map[string]any{"recipient_email": "nope"}),
		"direction unknown":    ok(map[string]any{"direction": "sideways"}),
		"ttl zero":             ok(map[string]any{"ttl_days": 0}),
		"ttl too long":         ok(map[string]any{"ttl_days": 91}),
		"ttl fractional":       ok(map[string]any{"ttl_days": 1.5}),
		"ttl string":           ok(map[string]any{"ttl_days": "7"}),
		"note too long":        ok(map[string]any{"note": strings.Repeat("n", 2001)}),
		"recipient name wrong": ok(map[string]any{"recipient_name": []string{"x"}}),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			expect(t, a.do("POST", "/api/v1/packages", token, body), http.StatusUnprocessableEntity)
		})
	}
	if n := a.rowCount("packages"); n != 0 {
		t.Fatalf("bad input wrote %d packages", n)
	}
	if n := a.rowCount("outbox"); n != 0 {
		t.Fatalf("bad input wrote %d events", n)
	}
	expect(t, a.do("POST", "/api/v1/packages", token, ok(map[string]any{"ttl_days": 90, "note": strings.Repeat("n", 2000)})), http.StatusCreated)
}

func TestUploadRejectsBadInput(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	path := "/api/v1/packages/" + p["id"].(string) + "/files"

	cases := []struct {
		name   string
		resp   func() response
		status int
	}{
		{"not multipart", func() response { return a.do("POST", path, token, map[string]any{"file": "x"}) }, http.StatusUnsupportedMediaType},
		{"no boundary", func() response {
			return a.do("POST", path, token, nil, "Content-Type", "multipart/form-data", "X-Raw-Body", "x")
		}, http.StatusUnsupportedMediaType},
		{"missing file part", func() response {
			var b bytes.Buffer
			mw := multipart.NewWriter(&b)
			_ = mw.WriteField("other", "value")
			_ = mw.Close()
			return a.do("POST", path, token, nil, "Content-Type", mw.FormDataContentType(), "X-Raw-Body", b.String())
		}, http.StatusUnprocessableEntity},
		{"truncated body", func() response {
			var b bytes.Buffer
			mw := multipart.NewWriter(&b)
			w, _ := mw.CreateFormFile("file", "cut.txt")
			_, _ = w.Write(bytes.Repeat([]byte("x"), 100_000))
			return a.do("POST", path, token, nil, "Content-Type", mw.FormDataContentType(), "X-Raw-Body", b.String())
		}, http.StatusBadRequest},
		{"parent path", func() response { return a.upload(path, token, "../etc/passwd", []byte("x")) }, http.StatusUnprocessableEntity},
		{"dot dot", func() response { return a.upload(path, token, "..", []byte("x")) }, http.StatusUnprocessableEntity},
		{"backslash path", func() response { return a.upload(path, token, `..\\win.ini`, []byte("x")) }, http.StatusUnprocessableEntity},
		{"control character", func() response { return a.upload(path, token, "a\tb.txt", []byte("x")) }, http.StatusUnprocessableEntity},
		{"empty filename", func() response { return a.upload(path, token, "", []byte("x")) }, http.StatusUnprocessableEntity},
		{"too long filename", func() response { return a.upload(path, token, strings.Repeat("f", 256), []byte("x")) }, http.StatusUnprocessableEntity},
		{"over the size limit", func() response {
			return a.upload(path, token, "big.bin", bytes.Repeat([]byte("b"), testMaxFileSize+1))
		}, http.StatusRequestEntityTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, tc.resp(), tc.status)
		})
	}
	if keys := a.objectKeys(); len(keys) != 0 {
		t.Fatalf("bad uploads left objects: %v", keys)
	}
	if n := a.rowCount("files"); n != 0 {
		t.Fatalf("bad uploads left %d file rows", n)
	}
	t.Run("connection dropped mid-file", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(a.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		head := "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n\r\n"
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: %d\r\n\r\n%s",
			path, token, 3<<20, head)
		_, _ = conn.Write(bytes.Repeat([]byte("z"), 2<<20))
		conn.Close()
		// Wait until the gateway has finished with the broken request.
		deadline := time.Now().Add(10 * time.Second)
		for a.answered("/api/v1/packages/:id/files", http.StatusBadRequest) < 2 {
			if time.Now().After(deadline) {
				t.Fatal("the dropped upload was not answered 400")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if keys := a.objectKeys(); len(keys) != 0 || a.rowCount("files") != 0 {
			t.Fatalf("a dropped upload left objects %v or rows", keys)
		}
	})
	// Exactly at the limit is fine.
	expect(t, a.upload(path, token, "max.bin", bytes.Repeat([]byte("b"), testMaxFileSize)), http.StatusCreated)
}

func TestListPackages(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	_, other := a.user("other@example.com", app.RoleRegular)
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	var created []string
	for i := range 27 {
		dir := "outbound"
		if i%3 == 0 {
			dir = "inbound"
		}
		p := a.createPackage(token, map[string]any{"title": fmt.Sprintf("p%02d", i), "recipient_email": "r@example.com", "direction": dir})
		created = append(created, p["id"].(string))
	}
	a.createPackage(other, map[string]any{"title": "not yours", "recipient_email": "r@example.com"})

	var seen []string
	cursor := ""
	pages := 0
	for {
		path := "/api/v1/packages?limit=10"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := a.do("GET", path, token, nil)
		expect(t, r, http.StatusOK)
		page := r.json(t)
		for _, it := range page["items"].([]any) {
			seen = append(seen, it.(map[string]any)["id"].(string))
		}
		pages++
		next, ok := page["next_cursor"].(string)
		if !ok {
			if page["next_cursor"] != nil {
				t.Fatalf("next_cursor = %v", page["next_cursor"])
			}
			break
		}
		cursor = next
	}
	if pages != 3 || len(seen) != 27 {
		t.Fatalf("pages = %d, items = %d; want 3 pages of 27 items", pages, len(seen))
	}
	for i, id := range seen {
		if want := created[len(created)-1-i]; id != want {
			t.Fatalf("item %d = %s, want %s (newest first)", i, id, want)
		}
	}

	r := a.do("GET", "/api/v1/packages?direction=inbound&limit=100", token, nil)
	if n := len(r.json(t)["items"].([]any)); n != 9 {
		t.Fatalf("inbound = %d, want 9", n)
	}
	r = a.do("GET", "/api/v1/packages?state=active", token, nil)
	if n := len(r.json(t)["items"].([]any)); n != 0 {
		t.Fatalf("active = %d, want 0", n)
	}
	r = a.do("GET", "/api/v1/packages?limit=100", admin, nil)
	if n := len(r.json(t)["items"].([]any)); n != 28 {
		t.Fatalf("admin sees %d, want 28", n)
	}
	r = a.do("GET", "/api/v1/packages", token, nil)
	if n := len(r.json(t)["items"].([]any)); n != 20 {
		t.Fatalf("default page = %d, want 20", n)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "state=lost", "direction=up", "cursor=!!!", "cursor=bm9wZQ"} {
		expect(t, a.do("GET", "/api/v1/packages?"+q, token, nil), http.StatusUnprocessableEntity)
	}
}

// TestFinalizeWithOneDatabaseConnection: a finalize needs one pool connection at a
// time. One that read through the pool inside its transaction deadlocked a gateway
// whose pool was full of such finalizes (found by the PostgreSQL-outage fault
// scenario); with a pool of one connection it would never return.
func TestFinalizeWithOneDatabaseConnection(t *testing.T) {
	a := newTestAPI(t, defaultConfig(), poolMaxConns(1))
	_, token := a.user("one@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "one conn", "recipient_email": "r@example.com"})
	expect(t, a.upload("/api/v1/packages/"+p["id"].(string)+"/files", token, "a.txt", []byte("x")), http.StatusCreated)
	req, _ := http.NewRequest("POST", a.url+"/api/v1/packages/"+p["id"].(string)+"/finalize", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := a.client(10 * time.Second).Do(req)
	if err != nil {
		t.Fatalf("finalize with a one-connection pool: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("finalize: %d", resp.StatusCode)
	}
}
