package web_test

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// blockScan runs the test gateway with SHIPFILE_SCAN=block.
func blockScan(o *options) { o.scanMode = app.ScanBlock }

// linkUpload uploads content as filename through the link of an inbound package and
// returns the file's id.
func (e *env) linkUpload(token, filename, content string) string {
	e.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, err := mw.CreateFormFile("file", filename)
	if err != nil {
		e.t.Fatal(err)
	}
	_, _ = w.Write([]byte(content))
	_ = mw.Close()
	resp, err := http.Post(e.url+"/api/v1/links/"+token+"/files", mw.FormDataContentType(), &body)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("upload through the link: %d", resp.StatusCode)
	}
	var id string
	if err := e.pool.QueryRow(context.Background(), `SELECT id FROM files WHERE filename = $1 ORDER BY created_at DESC LIMIT 1`, filename).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// setScan records a scanner's verdict on a file, as the scanner service does.
func (e *env) setScan(fileID string, scan app.ScanState) {
	e.t.Helper()
	if _, err := e.pool.Exec(context.Background(), `UPDATE files SET scan = $2, scanned_at = now() WHERE id = $1`, fileID, string(scan)); err != nil {
		e.t.Fatal(err)
	}
}

// scanBadge is the state a page shows of a file: the badge's data-scan and words, in
// the table row or list item of the file named name.
func scanBadge(t *testing.T, body, name string) (scan, words string) {
	t.Helper()
	i := strings.Index(body, ">"+name+"<")
	if i < 0 {
		t.Fatalf("no file %s on the page:\n%.3000s", name, body)
	}
	m := regexp.MustCompile(`<span class="badge scan[^"]*" data-scan="([a-z]+)">([^<]+)</span>`).FindStringSubmatch(body[i:])
	if m == nil {
		t.Fatalf("no scan state after file %s", name)
	}
	return m[1], m[2]
}

// The owner's package page shows each file's scan state in words, links only what the
// owner's download serves, and offers Release (a CSRF-protected form) for a file the
// scanner could not judge; once released the page says so.
func TestScanOwnerPage(t *testing.T) {
	e := newEnv(t, blockScan)
	owner, b := e.signedIn("owner@example.com")
	p, token := e.sent(owner, packages.NewPackage{Title: ptr("Invoices"), RecipientEmail: ptr("stranger@example.com"), Direction: ptr("inbound")})
	pending := e.linkUpload(token, "pending.pdf", "not checked yet")
	clean := e.linkUpload(token, "clean.txt", "fine")
	locked := e.linkUpload(token, "locked.zip", "an encrypted zip")
	bad := e.linkUpload(token, "bad.exe", "malware")
	e.setScan(clean, app.ScanClean)
	e.setScan(locked, app.ScanUnscannable)
	e.setScan(bad, app.ScanInfected)
	path := "/packages/" + p.ID.String()
	releaseAction := func(fileID string) string { return `action="` + path + `/files/` + fileID + `/release"` }
	download := func(fileID string) string {
		return `href="/api/v1/packages/` + p.ID.String() + `/files/` + fileID + `/content"`
	}

	pg := b.get(path)
	expectStatus(t, pg, http.StatusOK)
	for name, want := range map[string][2]string{
		"pending.pdf": {"pending", "being checked"},
		"clean.txt":   {"clean", "checked"},
		"locked.zip":  {"unscannable", "could not be checked"},
		"bad.exe":     {"infected", "malware found"},
	} {
		if scan, words := scanBadge(t, pg.body, name); scan != want[0] || words != want[1] {
			t.Errorf("%s shows %s %q, want %s %q", name, scan, words, want[0], want[1])
		}
	}
	if !strings.Contains(pg.body, releaseAction(locked)) {
		t.Error("no Release form for the unscannable file")
	}
	for _, id := range []string{pending, clean, bad} {
		if strings.Contains(pg.body, releaseAction(id)) {
			t.Errorf("a Release form for file %s, which the scanner judged or has not yet", id)
		}
	}
	if strings.Contains(pg.body, download(pending)) || strings.Contains(pg.body, download(locked)) || !strings.Contains(pg.body, download(clean)) {
		t.Error("the page links a held file for download, or not the clean one")
	}

	t.Run("release needs the CSRF token", func(t *testing.T) {
		expectStatus(t, b.post(path+"/files/"+locked+"/release", url.Values{"_csrf": {"forged"}}), http.StatusForbidden)
		if n := e.releases(locked); n != 0 {
			t.Fatalf("%d file.release entries after a forged form", n)
		}
	})
	t.Run("a file being checked cannot be released", func(t *testing.T) {
		b.get(path)
		pg := b.post(path+"/files/"+pending+"/release", url.Values{})
		expectStatus(t, pg, http.StatusConflict)
		if !strings.Contains(pg.body, "can be released") {
			t.Fatalf("the page does not say why:\n%.2000s", pg.body)
		}
	})
	t.Run("release", func(t *testing.T) {
		b.get(path)
		expectRedirect(t, b.post(path+"/files/"+locked+"/release", url.Values{}), path+"?msg=file-released")
		if n := e.releases(locked); n != 1 {
			t.Fatalf("%d file.release entries, want 1", n)
		}
		pg := b.get(path)
		if scan, words := scanBadge(t, pg.body, "locked.zip"); scan != "unscannable" || words != "released" {
			t.Fatalf("released file shows %s %q", scan, words)
		}
		if strings.Contains(pg.body, releaseAction(locked)) || !strings.Contains(pg.body, download(locked)) {
			t.Fatal("a released file still offers Release, or is not linked for download")
		}
	})
}

// releases counts the file.release audit entries of a file.
func (e *env) releases(fileID string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'file.release' AND file_id = $1`, fileID).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// The recipient's page shows each file's scan state in words, and downloads only what
// the link serves.
func TestScanRecipientPage(t *testing.T) {
	e := newEnv(t, blockScan)
	owner := e.user("owner@example.com", app.RoleRegular)
	ctx := context.Background()
	p, err := e.packages.Create(ctx, owner, app.Client{}, packages.NewPackage{Title: ptr("Report"), RecipientEmail: ptr("r@example.com")})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, name := range []string{"pending.pdf", "clean.pdf", "locked.zip", "released.zip"} {
		f, err := e.packages.UploadAsOwner(ctx, owner, app.Client{}, p.ID, app.Upload{Filename: name, ContentType: "application/octet-stream", Body: strings.NewReader("content of " + name)})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = f.ID.String()
	}
	_, links, err := e.packages.Finalize(ctx, owner, app.Client{}, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	token := links[0].MagicLink[strings.LastIndex(links[0].MagicLink, "/")+1:]
	e.setScan(ids["clean.pdf"], app.ScanClean)
	e.setScan(ids["locked.zip"], app.ScanUnscannable)
	e.setScan(ids["released.zip"], app.ScanError)
	if _, err := e.packages.ReleaseFile(ctx, owner, app.Client{}, p.ID, uuid.MustParse(ids["released.zip"])); err != nil {
		t.Fatal(err)
	}

	pg := e.browser().get("/p/" + token)
	expectStatus(t, pg, http.StatusOK)
	for name, want := range map[string][2]string{
		"pending.pdf":  {"pending", "being checked"},
		"clean.pdf":    {"clean", "checked"},
		"locked.zip":   {"unscannable", "could not be checked"},
		"released.zip": {"error", "released"},
	} {
		if scan, words := scanBadge(t, pg.body, name); scan != want[0] || words != want[1] {
			t.Errorf("%s shows %s %q, want %s %q", name, scan, words, want[0], want[1])
		}
	}
	for name, served := range map[string]bool{"pending.pdf": false, "clean.pdf": true, "locked.zip": false, "released.zip": true} {
		if got := strings.Contains(pg.body, `href="/api/v1/links/`+token+`/files/`+ids[name]+`"`); got != served {
			t.Errorf("%s: download offered %v, want %v", name, got, served)
		}
	}
	if !strings.Contains(pg.body, "could not be checked for malware") {
		t.Error("the held unscannable file does not say why")
	}
}
