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

// The send form's end-to-end encryption: the box posts encryption=age, the passphrase
// field has no name (it never leaves the browser), and the draft's page carries what
// static/e2e-outbound.js needs; the service worker is served at the root.
func TestEncryptedSendPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ann, b := e.signedIn("ann@example.com")

	form := b.get("/send")
	expectStatus(t, form, http.StatusOK)
	for _, want := range []string{`name="encryption" value="age"`, `/static/docs/e2e.bundle.js`, `/static/ui/e2e.js?v=`, `/static/ui/e2e-outbound.js?v=`} {
		if !strings.Contains(form.body, want) {
			t.Errorf("the send form lacks %s", want)
		}
	}
	if m := regexp.MustCompile(`<input id="e2e-passphrase"[^>]*>`).FindString(form.body); m == "" || strings.Contains(m, "name=") {
		t.Errorf("the passphrase input %q must have no name", m)
	}
	if req := b.get("/request"); strings.Contains(req.body, "e2e-outbound.js") {
		t.Error("the request form loads the outbound script")
	}

	// An unknown scheme is bad input: the form again, nothing created.
	bad := b.post("/send", url.Values{"recipient_email": {"bob@example.com"}, "title": {"Secret"}, "ttl_days": {"7"}, "encryption": {"rot13"}})
	if bad.status != http.StatusUnprocessableEntity || e.count("packages") != 0 {
		t.Fatalf("encryption=rot13: %d, %d packages", bad.status, e.count("packages"))
	}
	p := b.post("/send", url.Values{"recipient_email": {"bob@example.com"}, "title": {"Secret"}, "ttl_days": {"7"}, "encryption": {"age"}, "e2e_mode": {"key"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("send: %d %.500s", p.status, p.body)
	}
	id := strings.TrimPrefix(p.header.Get("Location"), "/packages/")
	pkg, _, err := e.packages.Get(context.Background(), ann, uuid.MustParse(id))
	if err != nil || pkg.Encryption != app.EncryptionAge {
		t.Fatalf("the package: %v %+v", err, pkg.Encryption)
	}
	draft := b.get("/packages/" + id)
	for _, want := range []string{`data-e2e="outbound"`, `data-package-id="` + id + `"`, `id="e2e-badge"`, `data-e2e-owner="` + id + `"`} {
		if !strings.Contains(draft.body, want) {
			t.Errorf("the draft's page lacks %s", want)
		}
	}

	// A plain package's pages stay as they were.
	p = b.post("/send", url.Values{"recipient_email": {"bob@example.com"}, "title": {"Plain"}, "ttl_days": {"7"}})
	plain := b.get(p.header.Get("Location"))
	if strings.Contains(plain.body, "data-e2e") || strings.Contains(plain.body, "e2e-outbound.js") {
		t.Error("a plain draft carries the encryption's parts")
	}

	sw := b.get("/sw-e2e.js")
	expectStatus(t, sw, http.StatusOK)
	if ct := sw.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") || sw.header.Get("Cache-Control") != "no-cache" ||
		!strings.Contains(sw.body, `importScripts("/static/docs/e2e.bundle.js", "/static/ui/e2e.js")`) {
		t.Fatalf("/sw-e2e.js: %s %s %.200s", ct, sw.header.Get("Cache-Control"), sw.body)
	}
}

// The recipient's page of an encrypted package: neutral names, Download buttons the
// script turns on, no link to the server's archive.
func TestEncryptedRecipientPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ann := e.user("ann@example.com", app.RoleRegular)
	ctx := context.Background()
	p, err := e.packages.Create(ctx, ann, app.Client{}, packages.NewPackage{Title: ptr("Secret"), RecipientEmail: ptr("bob@example.com"), Encryption: ptr("age")})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login("ann@example.com")
	b.get("/packages/" + p.ID.String())
	for _, name := range []string{"a.bin", "b.bin"} {
		up := b.e2eUpload("/api/v1/packages/"+p.ID.String()+"/files", name, []byte("age-encryption.org/v1\n-> X25519 abc\nxyz\n--- abc\n"+name))
		if up.status != http.StatusCreated {
			t.Fatalf("upload: %d %s", up.status, up.body)
		}
	}
	_, links, err := e.packages.Finalize(ctx, ann, app.Client{}, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	token := links[0].MagicLink[strings.LastIndex(links[0].MagicLink, "/")+1:]
	r := e.browser().get("/p/" + token)
	expectStatus(t, r, http.StatusOK)
	for _, want := range []string{`id="e2e-link"`, `data-manifest-url="/api/v1/links/` + token + `/manifest"`, "file-1.age", "file-2.age", `data-e2e-download disabled`, `id="download-all"`, "e2e-outbound.js"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the recipient's page lacks %s", want)
		}
	}
	if strings.Contains(r.body, "/archive") || strings.Contains(r.body, "a.bin") {
		t.Error("the recipient's page links the archive or shows a client's name")
	}
	// The field for a key passed on separately: hidden until the script shows it, and
	// never posted (no name, its form has no action).
	if m := regexp.MustCompile(`<input id="e2e-key"[^>]*>`).FindString(r.body); m == "" || strings.Contains(m, "name=") || !strings.Contains(r.body, `<form id="e2e-keyform" class="inline-form" novalidate hidden>`) {
		t.Errorf("the key field %q must exist, hidden, without a name", m)
	}
}

// e2eUpload posts content as the multipart file "file" with the session's CSRF token.
func (b *browser) e2eUpload(path, name string, content []byte) page {
	b.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, _ := mw.CreateFormFile("file", name)
	_, _ = w.Write(content)
	_ = mw.Close()
	req, _ := http.NewRequest("POST", b.e.url+path, &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-CSRF-Token", b.csrf)
	return b.do(req)
}
