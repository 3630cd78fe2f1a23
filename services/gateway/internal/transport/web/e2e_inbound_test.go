package web_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"html"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/shipfile/shipfile/services/gateway/internal/agetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// ageKeyPair makes an owner's key pair as the account page does: an X25519 identity
// and the identity sealed with passphrase (age scrypt, armored).
func ageKeyPair(t *testing.T, passphrase string) (*age.X25519Identity, string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id, agetest.SealWithPassphrase(t, id, passphrase)
}

func ageEncrypt(t *testing.T, to age.Recipient, plain []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, to)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(plain)
	w.Close()
	return buf.Bytes()
}

// TestEncryptedRequestPages covers the web UI's share of end-to-end encrypted file
// requests (docs/ENCRYPTION.md) without a browser: the session can
// store its key through the API (with the CSRF header), the request form offers
// encryption only with a key, the request page hands the browser the owner's public
// key and no plain upload zone, and the owner's page lists the files with neutral
// names and their encrypted manifest entries.
func TestEncryptedRequestPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, b := e.signedIn("ann@example.com")

	// No key: the option is off and points to the account page; forcing it is refused
	// beside the form, and nothing is created.
	form := b.get("/request")
	expectStatus(t, form, http.StatusOK)
	if !regexp.MustCompile(`<input type="checkbox" id="encryption" disabled>`).MatchString(form.body) || !strings.Contains(form.body, `href="/account#encryption-key"`) {
		t.Fatalf("the request form without a key:\n%s", form.body)
	}
	p := b.post("/request", url.Values{"recipient_email": {"bob@example.com"}, "title": {"Records"}, "ttl_days": {"3"}, "encryption": {"age"}})
	expectStatus(t, p, http.StatusUnprocessableEntity)
	if !strings.Contains(p.body, "set up your encryption key first") && !strings.Contains(p.body, "Set up your encryption key first") {
		t.Fatalf("an encrypted request without a key:\n%s", p.body)
	}
	if n := e.count("packages"); n != 0 {
		t.Fatalf("%d packages after a refused form", n)
	}

	// The account page's section; the key goes to the API with the session cookie and
	// the page's CSRF token (the page's script does this).
	acct := b.get("/account")
	if !strings.Contains(acct.body, `id="e2e-key" data-e2e-key`) || !strings.Contains(acct.body, "e2e-inbound.js") || !strings.Contains(acct.body, "/static/docs/e2e.bundle.js") {
		t.Fatalf("the account page has no encryption key section:\n%s", acct.body)
	}
	if !strings.Contains(acct.body, "Files of the requests you made so far stay sealed to the current key") {
		t.Fatal("replacing the key does not warn that earlier requests stay sealed to the old one")
	}
	meta := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindStringSubmatch(acct.body)
	id, sealed := ageKeyPair(t, "correct horse battery staple")
	body, _ := json.Marshal(map[string]string{"public_key": id.Recipient().String(), "sealed_identity": sealed})
	put := func(headers ...string) page {
		req, _ := http.NewRequest("PUT", e.url+"/api/v1/me/key", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		return b.do(req)
	}
	if p := put(); p.status != http.StatusForbidden {
		t.Fatalf("PUT /me/key with the session and no CSRF header: %d %s", p.status, p.body)
	}
	expectStatus(t, put("X-CSRF-Token", meta[1]), http.StatusOK)
	got := b.get("/api/v1/me/key")
	expectStatus(t, got, http.StatusOK)
	if !strings.Contains(got.body, id.Recipient().String()) {
		t.Fatalf("GET /me/key with the session: %s", got.body)
	}

	// With a key: the option is there; the request is encrypted.
	form = b.get("/request")
	if !strings.Contains(form.body, `name="encryption" value="age" id="encryption"`) {
		t.Fatalf("the request form with a key has no encryption option:\n%s", form.body)
	}
	p = b.post("/request", url.Values{"recipient_email": {"bob@example.com"}, "title": {"Records"}, "ttl_days": {"3"}, "encryption": {"age"}})
	expectStatus(t, p, http.StatusCreated)
	link := regexp.MustCompile(`/p/([A-Za-z0-9_-]{43})`).FindStringSubmatch(p.body)
	if link == nil {
		t.Fatalf("no link on the sent page:\n%s", p.body)
	}
	token := link[1]
	if !strings.Contains(p.body, `id="e2e-request-note"`) {
		t.Fatal("the sent page does not say the request is end-to-end encrypted")
	}
	ctx := context.Background()
	list, err := e.packages.List(ctx, owner, app.PackageFilter{Limit: 10})
	if err != nil || len(list) != 1 || list[0].Encryption != app.EncryptionAge {
		t.Fatalf("packages = %+v (%v), want one encrypted", list, err)
	}
	pkg := list[0]

	// The request page: the owner's public key and the encrypting zone, no plain one.
	anon := e.browser()
	rp := anon.get("/p/" + token)
	expectStatus(t, rp, http.StatusOK)
	if !strings.Contains(rp.body, `data-public-key="`+id.Recipient().String()+`"`) || !strings.Contains(rp.body, "data-e2e-upload") ||
		strings.Contains(rp.body, "data-upload-url") || !strings.Contains(rp.body, "End-to-end encrypted") {
		t.Fatalf("the encrypted request page:\n%s", rp.body)
	}

	// An upload as the page makes it (multipart here: the manifest field before the
	// file), then the owner's page: the neutral name and the manifest entry for the
	// browser, the passphrase form, and no plain name anywhere.
	entry := ageEncrypt(t, id.Recipient(), []byte(`{"name":"x-ray.png","type":"image/png","size":5}`))
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	mw.WriteField("manifest", base64.StdEncoding.EncodeToString(entry))
	fw, _ := mw.CreateFormFile("file", "x-ray.png")
	fw.Write(ageEncrypt(t, id.Recipient(), []byte("hello")))
	mw.Close()
	req, _ := http.NewRequest("POST", e.url+"/api/v1/links/"+token+"/files", &mp)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	expectStatus(t, anon.do(req), http.StatusCreated)

	pp := b.get("/packages/" + pkg.ID.String())
	expectStatus(t, pp, http.StatusOK)
	for _, want := range []string{`id="e2e-files" data-e2e-files`, `id="e2e-unlock"`, `data-neutral="file-1.age"`,
		`data-manifest="` + base64.StdEncoding.EncodeToString(entry) + `"`, `class="btn small e2e-download" href="/api/v1/packages/` + pkg.ID.String() + `/files/`} {
		if !strings.Contains(html.UnescapeString(pp.body), want) {
			t.Fatalf("the owner's page of the encrypted request lacks %s:\n%s", want, pp.body)
		}
	}
	if strings.Contains(pp.body, "x-ray") {
		t.Fatal("the owner's page shows the plain name")
	}
}
