package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"filippo.io/age"
	"filippo.io/age/armor"
	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/agetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// ageEncrypt encrypts plain to the recipients as a binary age file.
func ageEncrypt(t testing.TB, plain []byte, to ...age.Recipient) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := age.Encrypt(&out, to...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// ageDecrypt decrypts an age file with the identity.
func ageDecrypt(t testing.TB, file []byte, id age.Identity) []byte {
	t.Helper()
	r, err := age.Decrypt(bytes.NewReader(file), id)
	if err != nil {
		t.Fatalf("decrypt: %v", err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// uploadWithManifest posts content as the part "file", after a "manifest" field.
func (a *testAPI) uploadWithManifest(path, token, filename, manifest string, content []byte) response {
	a.t.Helper()
	return a.postFile(path, token, "manifest", manifest, filename, "application/pdf", content)
}

// storedObject reads a file's object straight from the bucket.
func (a *testAPI) storedObject(fileID string) []byte {
	a.t.Helper()
	ctx := context.Background()
	var key string
	if err := a.pool.QueryRow(ctx, `SELECT object_key FROM files WHERE id = $1`, fileID).Scan(&key); err != nil {
		a.t.Fatal(err)
	}
	obj, err := a.objects.Client.GetObject(ctx, a.objects.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		a.t.Fatal(err)
	}
	return b
}

// expectNeutral checks an encrypted package's file record: neutral, encrypted, not scanned.
func expectNeutral(t *testing.T, f map[string]any, name string, ct []byte) {
	t.Helper()
	if f["filename"] != name || f["content_type"] != "application/octet-stream" || f["encrypted"] != true ||
		f["scan"] != "skipped" || f["sha256"] != sha(ct) || f["size"] != float64(len(ct)) {
		t.Fatalf("encrypted file = %v, want %s, octet-stream, encrypted, skipped, the ciphertext's size and sha256", f, name)
	}
}

// tusUpload creates an upload with metadata and sends body in chunks of the sizes
// given (the rest in one last chunk); it returns the last answer.
func (a *testAPI) tusUpload(creation, token, metadata string, body []byte, chunks ...int) response {
	a.t.Helper()
	r := a.tusDo("POST", creation, token, nil, "Upload-Length", strconv.Itoa(len(body)), "Upload-Metadata", metadata)
	if r.status != http.StatusCreated {
		return r
	}
	url := r.header.Get("Location")
	off := 0
	for _, n := range append(chunks, len(body)) {
		end := min(off+n, len(body))
		r = a.patch(url, token, off, body[off:end])
		if r.status != http.StatusNoContent || end == len(body) {
			return r
		}
		off = end
	}
	return r
}

func TestEncryptedOutboundPackage(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, token := a.user("sender@example.com", app.RoleRegular)

	if p := a.createPackage(token, map[string]any{"title": "plain", "recipient_email": "r@example.com"}); p["encryption"] != "none" {
		t.Fatalf("default encryption = %v, want none", p["encryption"])
	}
	expect(t, a.do("POST", "/api/v1/packages", token, map[string]any{"title": "x", "recipient_email": "r@example.com", "encryption": "aes"}), http.StatusUnprocessableEntity)
	p := a.createPackage(token, map[string]any{"title": "Q3 report", "recipient_email": "bob@example.com", "encryption": "age"})
	if p["encryption"] != "age" {
		t.Fatalf("encryption = %v, want age", p["encryption"])
	}
	id := p["id"].(string)
	base := "/api/v1/packages/" + id
	// Not changeable later: PATCH knows no such field.
	expect(t, a.do("PATCH", base, token, map[string]any{"encryption": "none"}), http.StatusUnprocessableEntity)

	identity, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	plain1 := []byte("the quarterly figures, which the server must never see")
	ct1 := ageEncrypt(t, plain1, identity.Recipient())

	// Multipart: the record is neutral whatever the client sent.
	r := a.upload(base+"/files", token, "q3-secret-report.pdf", ct1)
	expect(t, r, http.StatusCreated)
	f1 := r.json(t)
	expectNeutral(t, f1, "file-1.age", ct1)
	if f1["manifest"] != nil {
		t.Fatalf("outbound file manifest = %v, want null", f1["manifest"])
	}

	// A plaintext upload is refused and leaves nothing behind.
	objects, rows := len(a.objectKeys()), a.rowCount("files")
	r = a.upload(base+"/files", token, "plain.txt", plain1)
	expect(t, r, http.StatusUnprocessableEntity)
	if !strings.Contains(r.json(t)["detail"].(string), "age") {
		t.Fatalf("detail = %s", r.body)
	}
	// An armored age file is not taken either, nor a body shorter than the magic.
	var armored bytes.Buffer
	aw := armor.NewWriter(&armored)
	_, _ = aw.Write(ct1)
	_ = aw.Close()
	expect(t, a.upload(base+"/files", token, "a.age", armored.Bytes()), http.StatusUnprocessableEntity)
	expect(t, a.upload(base+"/files", token, "a.age", []byte("age-encryption")), http.StatusUnprocessableEntity)
	if n, m := len(a.objectKeys()), a.rowCount("files"); n != objects || m != rows {
		t.Fatalf("after refused uploads: %d objects, %d rows, want %d and %d", n, m, objects, rows)
	}

	// tus: the magic split across chunks is checked as it comes.
	plain2 := bytes.Repeat([]byte("resumable ciphertext "), 4000)
	ct2 := ageEncrypt(t, plain2, identity.Recipient())
	r = a.tusUpload(base+"/uploads", token, meta("holiday photo.jpg"), ct2, 7, 30)
	expectTus(t, r, http.StatusNoContent)
	f2ID := r.header.Get("Shipfile-File-Id")
	if f2ID == "" {
		t.Fatal("the last PATCH named no file")
	}
	// A plaintext tus upload ends at the chunk that breaks the magic; nothing is kept.
	objects, rows = len(a.objectKeys()), a.rowCount("files")
	r = a.tusDo("POST", base+"/uploads", token, nil, "Upload-Length", strconv.Itoa(len(plain2)), "Upload-Metadata", meta("plain.txt"))
	expectTus(t, r, http.StatusCreated)
	plainURL := r.header.Get("Location")
	expectTus(t, a.patch(plainURL, token, 0, []byte("age-enc")), http.StatusNoContent)
	expectTus(t, a.patch(plainURL, token, 7, plain2[7:]), http.StatusUnprocessableEntity)
	if r := a.tusDo("HEAD", plainURL, token, nil); r.status != http.StatusNotFound {
		t.Fatalf("HEAD of the refused upload = %d, want 404", r.status)
	}
	// Shorter than the magic: refused at creation.
	r = a.tusDo("POST", base+"/uploads", token, nil, "Upload-Length", "5", "Upload-Metadata", meta("tiny"))
	expectTus(t, r, http.StatusUnprocessableEntity)
	if n, m, u := len(a.objectKeys()), a.rowCount("files"), a.incompleteUploads(); n != objects || m != rows || u != 0 {
		t.Fatalf("after the refused tus upload: %d objects, %d rows, %d incomplete uploads", n, m, u)
	}

	r = a.do("GET", base, token, nil)
	expect(t, r, http.StatusOK)
	files := r.json(t)["files"].([]any)
	if len(files) != 2 {
		t.Fatalf("files = %v", files)
	}
	expectNeutral(t, files[1].(map[string]any), "file-2.age", ct2)
	// Names stay unique after a removal.
	r = a.upload(base+"/files", token, "x", ageEncrypt(t, []byte("x"), identity.Recipient()))
	expect(t, r, http.StatusCreated)
	expect(t, a.do("DELETE", base+"/files/"+r.json(t)["id"].(string), token, nil), http.StatusNoContent)
	r = a.upload(base+"/files", token, "y", ageEncrypt(t, []byte("y"), identity.Recipient()))
	expect(t, r, http.StatusCreated)
	if name := r.json(t)["filename"]; name != "file-4.age" {
		t.Fatalf("after a removal: filename = %v, want file-4.age", name)
	}
	expect(t, a.do("DELETE", base+"/files/"+r.json(t)["id"].(string), token, nil), http.StatusNoContent)

	// The manifest: 404 until set, an age file of at most 1 MiB, on a draft age package.
	expect(t, a.do("GET", base+"/manifest", token, nil), http.StatusNotFound)
	manifest := ageEncrypt(t, fmt.Appendf(nil, `{"version":1,"files":{"%s":{"name":"q3.pdf","type":"application/pdf","size":%d}}}`, f1["id"], len(plain1)), identity.Recipient())
	octet := []string{"Content-Type", "application/octet-stream"}
	expect(t, a.do("PUT", base+"/manifest", token, nil, append(octet, "X-Raw-Body", `{"files":{}}`)...), http.StatusUnprocessableEntity)
	big := append([]byte(app.AgeMagic), bytes.Repeat([]byte{'x'}, app.MaxPackageManifest)...)
	expect(t, a.do("PUT", base+"/manifest", token, nil, append(octet, "X-Raw-Body", string(big))...), http.StatusRequestEntityTooLarge)
	expect(t, a.do("PUT", base+"/manifest", token, nil, "Content-Type", "text/plain", "X-Raw-Body", string(manifest)), http.StatusUnsupportedMediaType)
	expect(t, a.do("PUT", base+"/manifest", token, nil, append(octet, "X-Raw-Body", string(manifest[:40]))...), http.StatusNoContent)
	expect(t, a.do("PUT", base+"/manifest", token, nil, append(octet, "X-Raw-Body", string(manifest))...), http.StatusNoContent) // replaces
	r = a.do("GET", base+"/manifest", token, nil)
	expect(t, r, http.StatusOK)
	if !bytes.Equal(r.body, manifest) || r.header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("manifest = %d bytes (%s), want the %d stored", len(r.body), r.header.Get("Content-Type"), len(manifest))
	}
	plainID := a.createPackage(token, map[string]any{"title": "plain", "recipient_email": "r@example.com"})["id"].(string)
	expect(t, a.do("PUT", "/api/v1/packages/"+plainID+"/manifest", token, nil, append(octet, "X-Raw-Body", string(manifest))...), http.StatusConflict)
	_, stranger := a.user("stranger@example.com", app.RoleRegular)
	expect(t, a.do("GET", base+"/manifest", stranger, nil), http.StatusForbidden)

	r = a.do("POST", base+"/finalize", token, nil)
	expect(t, r, http.StatusOK)
	link := linkToken(t, r.json(t)["magic_link"])
	expect(t, a.do("PUT", base+"/manifest", token, nil, append(octet, "X-Raw-Body", string(manifest))...), http.StatusConflict)

	// Events name the neutral files (no new fields); the mail job says the package is
	// encrypted, and its link carries no key.
	ups := a.eventsOf(id, events.TypePackageFileUploaded)
	if len(ups) < 2 || ups[0].GetFileUploaded().GetFilename() != "file-1.age" || ups[1].GetFileUploaded().GetFilename() != "file-2.age" {
		t.Fatalf("file_uploaded events: %v", ups)
	}
	mailed := false
	for _, row := range a.outboxRows() {
		if !strings.HasPrefix(row.subject, "shipfile.mail.") {
			continue
		}
		opened, err := servicetest.Keyring(t).Open(string(row.payload))
		if err != nil {
			t.Fatal(err)
		}
		job, err := events.UnmarshalMailJob([]byte(opened))
		if err != nil {
			t.Fatal(err)
		}
		if job.GetPackageId() == id {
			mailed = job.GetEncrypted() && strings.HasSuffix(job.GetMagicLink(), "/p/"+link)
		}
	}
	if !mailed {
		t.Fatal("no mail job marked encrypted with the plain magic link")
	}

	// The link: encryption, no public key, the manifest (not a download), no archive.
	r = a.do("GET", "/api/v1/links/"+link, "", nil)
	expect(t, r, http.StatusOK)
	lp := r.json(t)
	if lp["encryption"] != "age" || lp["public_key"] != nil {
		t.Fatalf("link package = %v", lp)
	}
	r = a.do("GET", "/api/v1/links/"+link+"/manifest", "", nil)
	expect(t, r, http.StatusOK)
	if !bytes.Equal(r.body, manifest) {
		t.Fatal("the link's manifest differs from the stored one")
	}
	expect(t, a.do("GET", "/api/v1/links/"+link+"/archive", "", nil), http.StatusConflict)
	r = a.do("GET", "/api/v1/links/"+link+"/files/"+f1["id"].(string), "", nil)
	expect(t, r, http.StatusOK)
	if !bytes.Equal(ageDecrypt(t, r.body, identity), plain1) {
		t.Fatal("the downloaded file does not decrypt to the original")
	}
	r = a.do("GET", base, token, nil)
	for _, f := range r.json(t)["files"].([]any) {
		if f := f.(map[string]any); f["id"] == f1["id"] && f["download_count"] != float64(1) {
			t.Fatalf("download_count = %v, want 1 (the manifest is not a download)", f["download_count"])
		}
	}

	// What the bucket holds is ciphertext, which decrypts to the original.
	for id, plain := range map[string][]byte{f1["id"].(string): plain1, f2ID: plain2} {
		stored := a.storedObject(id)
		if bytes.Contains(stored, plain[:20]) || !bytes.HasPrefix(stored, []byte(app.AgeMagic)) {
			t.Fatal("the stored object is not an age file, or holds the plaintext")
		}
		if !bytes.Equal(ageDecrypt(t, stored, identity), plain) {
			t.Fatal("the stored object does not decrypt to the original")
		}
	}

	// A revoked package's link answers 410 here as on its other routes.
	expect(t, a.do("POST", base+"/revoke", token, nil), http.StatusOK)
	expect(t, a.do("GET", "/api/v1/links/"+link+"/manifest", "", nil), http.StatusGone)
}

func TestEncryptedFileRequest(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	inbound := map[string]any{"title": "Send me the contract", "recipient_email": "carol@example.com", "direction": "inbound", "encryption": "age"}

	// No key yet: no encrypted request.
	expect(t, a.do("GET", "/api/v1/me/key", token, nil), http.StatusNotFound)
	r := a.do("POST", "/api/v1/packages", token, inbound)
	expect(t, r, http.StatusUnprocessableEntity)
	if d := r.json(t)["detail"]; d != "set up your encryption key first (PUT /api/v1/me/key)" {
		t.Fatalf("detail = %v", d)
	}

	identity, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	pub := identity.Recipient().String()
	sealed := agetest.SealWithPassphrase(t, identity, "correct horse battery staple")
	other, _ := age.GenerateX25519Identity()
	x25519Sealed := agetest.Seal(t, identity, other.Recipient()) // armored, but sealed to a key instead of a passphrase
	for name, body := range map[string]map[string]any{
		"bad public key":   {"public_key": "age1nope", "sealed_identity": sealed},
		"secret as public": {"public_key": identity.String(), "sealed_identity": sealed},
		"not armored":      {"public_key": pub, "sealed_identity": "AGE-SECRET-KEY-1..."},
		"not scrypt":       {"public_key": pub, "sealed_identity": x25519Sealed},
		"too large":        {"public_key": pub, "sealed_identity": sealed + strings.Repeat("\n", 5000)},
		"missing":          {"public_key": pub},
	} {
		if r := a.do("PUT", "/api/v1/me/key", token, body); r.status != http.StatusUnprocessableEntity {
			t.Errorf("%s: status = %d, want 422: %s", name, r.status, r.body)
		}
	}
	r = a.do("PUT", "/api/v1/me/key", token, map[string]any{"public_key": pub, "sealed_identity": sealed})
	expect(t, r, http.StatusOK)
	r = a.do("GET", "/api/v1/me/key", token, nil)
	expect(t, r, http.StatusOK)
	if k := r.json(t); k["public_key"] != pub || k["sealed_identity"] != sealed {
		t.Fatalf("key = %v", k)
	}
	// The sealed identity opens with the passphrase alone.
	scrypt, _ := age.NewScryptIdentity("correct horse battery staple")
	if got := ageDecrypt(t, mustReadAll(t, armor.NewReader(strings.NewReader(sealed))), scrypt); string(got) != identity.String() {
		t.Fatal("the stored sealed identity does not open to the identity")
	}

	p := a.createPackage(token, inbound)
	base := "/api/v1/packages/" + p["id"].(string)
	r = a.do("POST", base+"/finalize", token, nil)
	expect(t, r, http.StatusOK)
	link := linkToken(t, r.json(t)["magic_link"])
	r = a.do("GET", "/api/v1/links/"+link, "", nil)
	expect(t, r, http.StatusOK)
	if lp := r.json(t); lp["public_key"] != pub || lp["encryption"] != "age" {
		t.Fatalf("link package = %v, want public_key %s", lp, pub)
	}

	// Multipart through the link, with the uploader's manifest entry.
	plain := []byte("%PDF-1.7 the signed contract")
	ct := ageEncrypt(t, plain, identity.Recipient())
	entry := fmt.Appendf(nil, `{"name":"contract.pdf","type":"application/pdf","size":%d}`, len(plain))
	m64 := base64.StdEncoding.EncodeToString(ageEncrypt(t, entry, identity.Recipient()))
	r = a.uploadWithManifest("/api/v1/links/"+link+"/files", "", "contract.pdf", m64, ct)
	expect(t, r, http.StatusCreated)
	f := r.json(t)
	expectNeutral(t, f, "file-1.age", ct)
	if f["manifest"] != m64 {
		t.Fatalf("manifest = %v, want the one sent", f["manifest"])
	}
	// Bad manifests: not base64, not an age file, too large; nothing kept.
	rows := a.rowCount("files")
	for name, m := range map[string]string{
		"not base64": "%%%",
		"plaintext":  base64.StdEncoding.EncodeToString(entry),
		"too large":  base64.StdEncoding.EncodeToString(append([]byte(app.AgeMagic), make([]byte, app.MaxFileManifest)...)),
	} {
		if r := a.uploadWithManifest("/api/v1/links/"+link+"/files", "", "c.pdf", m, ct); r.status != http.StatusUnprocessableEntity {
			t.Errorf("%s manifest: status = %d, want 422: %s", name, r.status, r.body)
		}
	}
	if n := a.rowCount("files"); n != rows {
		t.Fatalf("files = %d after refused uploads, want %d", n, rows)
	}

	// tus through the link, the manifest in the metadata.
	plain2 := bytes.Repeat([]byte("scan "), 3000)
	ct2 := ageEncrypt(t, plain2, identity.Recipient())
	m2 := base64.StdEncoding.EncodeToString(ageEncrypt(t, []byte(`{"name":"scan.png","type":"image/png","size":15000}`), identity.Recipient()))
	md := meta("scan.png") + ",manifest " + base64.StdEncoding.EncodeToString([]byte(m2))
	r = a.tusUpload("/api/v1/links/"+link+"/uploads", "", md, ct2)
	expectTus(t, r, http.StatusNoContent)
	fileID := r.header.Get("Shipfile-File-Id")

	// The owner sees both, each with its manifest, which opens with the identity.
	r = a.do("GET", base, token, nil)
	expect(t, r, http.StatusOK)
	files := r.json(t)["files"].([]any)
	if len(files) != 2 {
		t.Fatalf("files = %v", files)
	}
	f2 := files[1].(map[string]any)
	expectNeutral(t, f2, "file-2.age", ct2)
	if f2["id"] != fileID || f2["manifest"] != m2 {
		t.Fatalf("tus file = %v", f2)
	}
	raw, _ := base64.StdEncoding.DecodeString(f2["manifest"].(string))
	var e struct {
		Name string `json:"name"`
		Size int    `json:"size"`
	}
	if err := json.Unmarshal(ageDecrypt(t, raw, identity), &e); err != nil || e.Name != "scan.png" || e.Size != 15000 {
		t.Fatalf("manifest entry = %+v, %v", e, err)
	}
	if !bytes.Equal(ageDecrypt(t, a.storedObject(fileID), identity), plain2) {
		t.Fatal("the stored object does not decrypt to the original")
	}

	// A manifest entry is for encrypted requests only.
	plainReq := a.createPackage(token, map[string]any{"title": "plain", "recipient_email": "d@example.com", "direction": "inbound"})
	r = a.do("POST", "/api/v1/packages/"+plainReq["id"].(string)+"/finalize", token, nil)
	plainLink := linkToken(t, r.json(t)["magic_link"])
	if r := a.do("GET", "/api/v1/links/"+plainLink, "", nil); r.json(t)["public_key"] != nil || r.json(t)["encryption"] != "none" {
		t.Fatalf("plain request link = %s", r.body)
	}
	expect(t, a.uploadWithManifest("/api/v1/links/"+plainLink+"/files", "", "c.pdf", m64, plain), http.StatusUnprocessableEntity)

	// A protected link's manifest takes the link's grant, as its other routes do.
	locked := a.createPackage(token, map[string]any{"title": "locked", "recipient_email": "e@example.com", "direction": "inbound", "encryption": "age", "password": "open sesame 42"})
	r = a.do("POST", "/api/v1/packages/"+locked["id"].(string)+"/finalize", token, nil)
	lockedLink := linkToken(t, r.json(t)["magic_link"])
	expect(t, a.do("GET", "/api/v1/links/"+lockedLink+"/manifest", "", nil), http.StatusUnauthorized)
	r = a.unlock(lockedLink, "open sesame 42")
	expect(t, r, http.StatusOK)
	expect(t, a.do("GET", "/api/v1/links/"+lockedLink+"/manifest", "", nil, "Shipfile-Link-Grant", r.json(t)["grant"].(string)), http.StatusNotFound)

	// Replacing the key: the open request keeps the key it was created with
	// (request_key_test.go goes further).
	next, _ := age.GenerateX25519Identity()
	expect(t, a.do("PUT", "/api/v1/me/key", token, map[string]any{"public_key": next.Recipient().String(), "sealed_identity": agetest.SealWithPassphrase(t, next, "another passphrase")}), http.StatusOK)
	if r := a.do("GET", "/api/v1/links/"+link, "", nil); r.json(t)["public_key"] != pub {
		t.Fatalf("after replacing the key: %s, want the request's own key %s", r.body, pub)
	}
}

func mustReadAll(t testing.TB, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
