package browser

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"
	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
)

// inboundFetch calls the API from the tab's page (its session cookie) and returns the
// status and the decoded body.
func (tb *tab) inboundFetch(path string) (int, map[string]any) {
	tb.t.Helper()
	raw := run(tb, chromedp.Evaluate[string](`fetch(`+jsString(path)+`, {credentials: "same-origin"}).then(r => r.text().then(b => JSON.stringify({status: r.status, body: b})))`, chromedp.EvalAwaitPromise))
	var out struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		tb.t.Fatalf("fetch %s: %v", path, err)
	}
	var body map[string]any
	_ = json.Unmarshal([]byte(out.Body), &body)
	return out.Status, body
}

// inboundDownload clicks sel and returns the bytes of the download it starts.
func (tb *tab) inboundDownload(sel string) []byte {
	tb.t.Helper()
	dir := tb.t.TempDir()
	if _, err := chromedp.CallBrowser(tb.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, BrowserContextID: chromedp.FromContext(tb.ctx).BrowserContextID,
		DownloadPath: dir, EventsEnabled: new(true),
	}); err != nil {
		tb.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(tb.ctx, time.Minute)
	defer cancel()
	progress := chromedp.BrowserEvents(ctx, browser.DownloadProgress)
	tb.do(chromedp.Click(css(sel)))
	for ev, err := range progress {
		if err != nil {
			tb.t.Fatalf("download of %s: %v", sel, err)
		}
		switch ev.State {
		case browser.DownloadProgressStateCompleted:
			b, err := os.ReadFile(filepath.Join(dir, ev.GUID))
			if err != nil {
				tb.t.Fatal(err)
			}
			return b
		case browser.DownloadProgressStateCanceled:
			tb.t.Fatalf("download of %s canceled", sel)
		}
	}
	tb.t.Fatalf("no download from %s", sel)
	return nil
}

// inboundSignIn signs in with the password form.
func (tb *tab) inboundSignIn(email, password string) {
	tb.t.Helper()
	tb.open("/login")
	tb.do(chromedp.SendKeys(css("#email"), email), chromedp.SendKeys(css("#password"), password))
	tb.submit(chromedp.Click(css("form button[type=submit]")))
	tb.do(chromedp.WaitVisible(css(".me a")))
}

// createE2EKey makes the signed-in owner's key pair on the account page, sealed by
// passphrase (typed twice), and returns the public key the page shows.
func (tb *tab) createE2EKey(passphrase string) string {
	tb.t.Helper()
	tb.open("/account")
	tb.do(chromedp.WaitVisible(css("#e2e-create")),
		chromedp.SetValue(css("#e2e-pass"), passphrase), chromedp.SetValue(css("#e2e-pass2"), passphrase),
		chromedp.Click(css("#e2e-create-button")))
	tb.waitJS("the key to be made", `document.getElementById('e2e-key').getAttribute('data-state') === 'some'`)
	pub := tb.value("#e2e-public-key")
	if !strings.HasPrefix(pub, "age1") {
		tb.t.Fatalf("public key shown = %q", pub)
	}
	return pub
}

// encryptedRequest asks, from the owner's tab (the owner has a key), for files from
// an address with an encrypted request; it returns the request's link and package id.
func (tb *tab) encryptedRequest(from, title string) (link, pkgID string) {
	tb.t.Helper()
	tb.open("/request")
	if run(tb, chromedp.Evaluate[bool](`document.getElementById('encryption').disabled`)) {
		tb.t.Fatal("the encryption option is disabled although the owner has a key")
	}
	tb.do(
		chromedp.SendKeys(css("#recipient_email"), from),
		chromedp.SendKeys(css("#title"), title),
		chromedp.Click(css("#encryption")),
	)
	if st := tb.submit(chromedp.Click(css("#package-form button[type=submit]"))); st != http.StatusCreated {
		tb.t.Fatalf("the encrypted request: %d", st)
	}
	link = tb.value("#magic-link")
	_, list := tb.inboundFetch("/api/v1/packages?direction=inbound")
	pkg := list["items"].([]any)[0].(map[string]any)
	if pkg["encryption"] != "age" || pkg["title"] != title {
		tb.t.Fatalf("the newest inbound package = %v, want the encrypted request %q", pkg, title)
	}
	return link, pkg["id"].(string)
}

func inboundSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestE2EInboundRequest checks end-to-end encrypted file requests (docs/WEB-UI.md,
// "End-to-end encrypted file requests") in a real browser: the owner makes a key sealed by
// a passphrase on the account page, asks for files with an encrypted request, the
// recipient's page encrypts two uploads to the owner's key, the bucket holds age files that
// filippo.io/age decrypts with the owner's identity (unsealed in Go from the server's copy,
// and exported from the page), and the owner, on another browser profile, types the
// passphrase and downloads the originals; a wrong passphrase says so.
func TestE2EInboundRequest(t *testing.T) {
	sys := startOutSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	bctx := newBrowser(t, ctx)
	owner := newTab(t, bctx, sys.base)
	const (
		email      = "olga@example.com"
		password   = "a long owner password"
		passphrase = "correct horse battery staple"
	)
	owner.setup(email, "Olga Owner", password)
	owner.inboundSignIn(email, password)

	// Without a key the request form offers no encryption, only the way to a key.
	owner.open("/request")
	if run(owner, chromedp.Evaluate[bool](`document.getElementById('encryption').disabled`)) != true {
		t.Fatal("the encryption option is enabled before the owner has a key")
	}
	if href := run(owner, chromedp.Evaluate[string](`document.querySelector('#e2e-field a').getAttribute('href')`)); !strings.HasPrefix(href, "/account") {
		t.Fatalf("the request form links to %q for a key, want the account page", href)
	}

	// Account → Encryption key: two different passphrases are refused in the page.
	owner.open("/account")
	owner.do(chromedp.WaitVisible(css("#e2e-create")))
	owner.do(chromedp.SendKeys(css("#e2e-pass"), passphrase), chromedp.SendKeys(css("#e2e-pass2"), passphrase+"!"),
		chromedp.Click(css("#e2e-create-button")))
	owner.waitJS("the mismatch error", `(document.querySelector('#e2e-create .field-error').textContent || '').includes('differ')`)
	if st, _ := owner.inboundFetch("/api/v1/me/key"); st != http.StatusNotFound {
		t.Fatalf("a refused form stored a key: GET /me/key = %d", st)
	}
	pub := owner.createE2EKey(passphrase)
	owner.shot("e2e-inbound-account-key")
	st, key := owner.inboundFetch("/api/v1/me/key")
	if st != http.StatusOK || key["public_key"] != pub {
		t.Fatalf("GET /me/key = %d %v, want the key shown (%s)", st, key, pub)
	}
	sealed, _ := key["sealed_identity"].(string)
	if strings.Contains(sealed, "AGE-SECRET-KEY") || !strings.HasPrefix(sealed, "-----BEGIN AGE ENCRYPTED FILE-----") {
		t.Fatalf("sealed_identity is not an armored age file: %.80q", sealed)
	}
	// The server's copy opens with the passphrase alone (age's scrypt), to the key of
	// the public key.
	scrypt, err := age.NewScryptIdentity(passphrase)
	if err != nil {
		t.Fatal(err)
	}
	r, err := age.Decrypt(armor.NewReader(strings.NewReader(sealed)), scrypt)
	if err != nil {
		t.Fatalf("the sealed identity does not open with the passphrase: %v", err)
	}
	plain, _ := io.ReadAll(r)
	identity, err := age.ParseX25519Identity(strings.TrimSpace(string(plain)))
	if err != nil {
		t.Fatalf("the sealed identity holds %d bytes that are not an age identity: %v", len(plain), err)
	}
	if identity.Recipient().String() != pub {
		t.Fatalf("the sealed identity is of %s, the public key is %s", identity.Recipient(), pub)
	}
	wrongScrypt, _ := age.NewScryptIdentity("not the passphrase")
	if _, err := age.Decrypt(armor.NewReader(strings.NewReader(sealed)), wrongScrypt); err == nil {
		t.Fatal("the sealed identity opens with a wrong passphrase")
	}

	// Export: a wrong passphrase says so; the right one downloads a key file that
	// age's own parser reads.
	owner.do(chromedp.SendKeys(css("#e2e-export-pass"), "not the passphrase"), chromedp.Click(css("#e2e-export-button")))
	owner.waitJS("the export's wrong passphrase", `(document.querySelector('#e2e-export .field-error').textContent || '').includes('Wrong passphrase')`)
	owner.do(chromedp.SetValue(css("#e2e-export-pass"), passphrase))
	keyFile := owner.inboundDownload("#e2e-export-button")
	exported, err := age.ParseIdentities(bytes.NewReader(keyFile))
	if err != nil || len(exported) != 1 {
		t.Fatalf("the exported key file does not parse: %v\n%s", err, keyFile)
	}
	if x, ok := exported[0].(*age.X25519Identity); !ok || x.String() != identity.String() {
		t.Fatal("the exported key is not the sealed one")
	}

	// An encrypted request.
	link, pkgID := owner.encryptedRequest("rita@example.com", "Medical records")

	// The recipient's page encrypts both files before they leave (one of them larger
	// than a tus request, so it goes in several), through a proxy that slows uploads
	// to 3 MB/s and cuts the connection once 2 MiB are sent: the page goes on from
	// where the server stands (resumable within the page).
	recipient := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	proxy := cutOnce(t, strings.TrimPrefix(sys.base, "http://"), 3e6, 2<<20+12345)
	if st := recipient.open(strings.Replace(link, sys.base, "http://"+proxy, 1)); st != http.StatusOK {
		t.Fatalf("the request page: %d", st)
	}
	if notice := recipient.text("#e2e-notice"); !strings.Contains(notice, "only they can open") {
		t.Fatalf("the request page does not say the files are encrypted: %q", notice)
	}
	scan, scanSum := writeFile(t, "scan of the knee.pdf", 9<<20+123)
	letter, letterSum := writeFile(t, "letter.txt", 20<<10)
	originals := map[string]string{"scan of the knee.pdf": scanSum, "letter.txt": letterSum}
	sizes := map[string]int{"scan of the knee.pdf": 9<<20 + 123, "letter.txt": 20 << 10}
	recipient.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`),
		setFiles("#files-input", []string{scan, letter}))
	recipient.waitJS("both encrypted uploads", `document.querySelectorAll('.uploads li[data-state=done][data-encrypted]').length === 2`)
	if !run(recipient, chromedp.Evaluate[bool](`!!document.querySelector('.uploads li[data-retried]')`)) {
		t.Fatal("the scan's upload did not see the connection drop (no retry)")
	}
	recipient.shot("e2e-inbound-request-upload")

	// What the server keeps: neutral names, age files in the bucket that differ from
	// the files and decrypt to them with the owner's identity, and manifests that
	// decrypt to the names and sizes.
	_, detail := owner.inboundFetch("/api/v1/packages/" + pkgID)
	files := detail["files"].([]any)
	if len(files) != 2 {
		t.Fatalf("files = %v", files)
	}
	db, err := pgx.Connect(ctx, sys.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	seen := map[string]bool{}
	objects, objectKeys := map[string][]byte{}, map[string]string{} // by the file's real name
	for _, f := range files {
		f := f.(map[string]any)
		name, _ := f["filename"].(string)
		if f["encrypted"] != true || !strings.HasPrefix(name, "file-") || !strings.HasSuffix(name, ".age") {
			t.Fatalf("file record = %v, want encrypted with a neutral name", f)
		}
		m, err := base64.StdEncoding.DecodeString(f["manifest"].(string))
		if err != nil {
			t.Fatalf("manifest: %v", err)
		}
		mr, err := age.Decrypt(bytes.NewReader(m), identity)
		if err != nil {
			t.Fatalf("the manifest does not decrypt with the owner's key: %v", err)
		}
		var entry struct {
			Name string `json:"name"`
			Type string `json:"type"`
			Size int    `json:"size"`
		}
		if err := json.NewDecoder(mr).Decode(&entry); err != nil {
			t.Fatal(err)
		}
		if _, ok := originals[entry.Name]; !ok || sizes[entry.Name] != entry.Size {
			t.Fatalf("manifest entry = %+v", entry)
		}
		var objectKey string
		if err := db.QueryRow(ctx, `SELECT object_key FROM files WHERE id = $1`, f["id"]).Scan(&objectKey); err != nil {
			t.Fatal(err)
		}
		obj, err := sys.store.Client.GetObject(ctx, sys.store.Bucket, objectKey, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stored, err := io.ReadAll(obj)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(stored, []byte("age-encryption.org/v1\n")) || inboundSum(stored) == originals[entry.Name] || bytes.Contains(stored, []byte(entry.Name)) {
			t.Fatalf("the stored object of %s is not an age file that hides it", entry.Name)
		}
		if inboundSum(stored) != f["sha256"] {
			t.Fatalf("the record's sha256 is not the stored ciphertext's")
		}
		for _, id := range []age.Identity{identity, exported[0]} {
			pr, err := age.Decrypt(bytes.NewReader(stored), id)
			if err != nil {
				t.Fatalf("the stored %s does not decrypt: %v", entry.Name, err)
			}
			got, err := io.ReadAll(pr)
			if err != nil || inboundSum(got) != originals[entry.Name] {
				t.Fatalf("the stored %s decrypts to %d other bytes (%v)", entry.Name, len(got), err)
			}
		}
		seen[entry.Name] = true
		objects[entry.Name] = stored
		objectKeys[entry.Name] = objectKey
	}
	if len(seen) != 2 {
		t.Fatalf("the manifests name %v", seen)
	}

	// The owner on another browser profile: neutral names until the passphrase.
	other := newTab(t, newBrowser(t, ctx), sys.base)
	other.inboundSignIn(email, password)
	other.open("/packages/" + pkgID)
	other.do(chromedp.WaitVisible(css("#e2e-unlock")))
	if names := other.text("#files-table"); strings.Contains(names, "letter.txt") || !strings.Contains(names, "file-1.age") {
		t.Fatalf("the page shows names before the passphrase:\n%s", names)
	}
	other.shot("e2e-inbound-owner-locked")
	other.do(chromedp.SendKeys(css("#e2e-unlock-pass"), "Correct Horse Battery Staple"), chromedp.Click(css("#e2e-unlock-button")))
	other.waitJS("the wrong passphrase's error", `!document.getElementById('e2e-unlock-error').hidden`)
	if msg := other.text("#e2e-unlock-error"); !strings.Contains(msg, "Wrong passphrase") {
		t.Fatalf("wrong passphrase message = %q", msg)
	}
	other.shot("e2e-inbound-owner-wrong-passphrase")
	other.do(chromedp.SetValue(css("#e2e-unlock-pass"), passphrase), chromedp.Click(css("#e2e-unlock-button")))
	other.waitJS("the names", `document.getElementById('e2e-files').getAttribute('data-names') === '1'`)
	table := other.text("#files-table")
	for name := range originals {
		if !strings.Contains(table, name) {
			t.Fatalf("the unlocked page does not name %s:\n%s", name, table)
		}
	}
	if !strings.Contains(table, "9.0 MiB") {
		t.Fatalf("the unlocked page does not show the plaintext size:\n%s", table)
	}
	if leaked := run(other, chromedp.Evaluate[bool](`JSON.stringify(Object.assign({}, localStorage)).includes('AGE-SECRET-KEY')`)); leaked {
		t.Fatal("the identity is in localStorage")
	}
	other.shot("e2e-inbound-owner-unlocked")
	for name, sum := range originals {
		got := other.inboundDownload(`#files-table tr[data-name=` + jsString(name) + `] a.e2e-download`)
		if inboundSum(got) != sum {
			t.Fatalf("the owner's download of %s: %d bytes that differ from the original", name, len(got))
		}
	}
	// Through the shared download service worker (decrypting to disk as it comes),
	// not the in-memory fallback.
	if !run(other, chromedp.Evaluate[bool](`navigator.serviceWorker.getRegistration('/e2e/').then(r => !!(r && r.active))`, chromedp.EvalAwaitPromise)) {
		t.Fatal("the downloads did not go through the service worker")
	}
	// Download all: one zip made in the browser, with the real names.
	zipped := other.inboundDownload("#e2e-download-all")
	zr, err := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
	if err != nil {
		t.Fatalf("Download all gave no zip: %v", err)
	}
	if len(zr.File) != len(originals) {
		t.Fatalf("the zip has %d entries, want %d", len(zr.File), len(originals))
	}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if inboundSum(got) != originals[zf.Name] {
			t.Fatalf("the zip's %q differs from the original", zf.Name)
		}
	}

	// A stored object changed behind the server's back fails age's authentication:
	// the page says the file was altered and saves nothing.
	tampered := bytes.Clone(objects["letter.txt"])
	tampered[len(tampered)-100] ^= 1
	if _, err := sys.store.Client.PutObject(ctx, sys.store.Bucket, objectKeys["letter.txt"], bytes.NewReader(tampered), int64(len(tampered)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	other.do(chromedp.Click(css(`#files-table tr[data-name='letter.txt'] a.e2e-download`)))
	other.waitJS("the altered file's failure", `document.querySelector("#files-table tr[data-name='letter.txt']").getAttribute('data-download') === 'error'`)
	if msg := other.text(`#files-table tr[data-name='letter.txt'] .e2e-state`); !strings.Contains(msg, "altered") {
		t.Fatalf("the altered file's download says %q", msg)
	}
	other.shot("e2e-inbound-owner-altered")

	// The key stays open in this tab across a reload (sessionStorage), and Lock
	// forgets it.
	other.open("/packages/" + pkgID)
	other.waitJS("the names after a reload", `document.getElementById('e2e-files').getAttribute('data-names') === '1'`)
	other.do(chromedp.Click(css("#e2e-lock")))
	if s := run(other, chromedp.Evaluate[string](`sessionStorage.getItem('shipfile.e2e.identity') || ''`)); s != "" {
		t.Fatal("Lock left the identity in sessionStorage")
	}
	if names := other.text("#files-table"); strings.Contains(names, "letter.txt") {
		t.Fatalf("Lock left the names on the page:\n%s", names)
	}

	// Replacing the key wants the warning ticked; afterwards the request's files,
	// sealed to the old key, say so after the new passphrase.
	const newPassphrase = "a brand new passphrase"
	owner.open("/account")
	owner.waitJS("the key section", `document.getElementById('e2e-key').getAttribute('data-state') === 'some'`)
	owner.do(chromedp.Click(css("#e2e-replace-details summary")),
		chromedp.SendKeys(css("#e2e-new-pass"), newPassphrase), chromedp.SendKeys(css("#e2e-new-pass2"), newPassphrase),
		chromedp.Click(css("#e2e-replace-button")))
	owner.waitJS("the unticked warning", `(document.querySelector('#e2e-replace .field-error').textContent || '').includes('earlier requests')`)
	owner.do(chromedp.Click(css("#e2e-replace-ack")), chromedp.Click(css("#e2e-replace-button")))
	owner.waitJS("the new key", `document.getElementById('e2e-public-key').value.startsWith('age1') && document.getElementById('e2e-public-key').value !== `+jsString(pub))
	owner.open("/packages/" + pkgID)
	owner.do(chromedp.WaitVisible(css("#e2e-unlock")), chromedp.SendKeys(css("#e2e-unlock-pass"), newPassphrase), chromedp.Click(css("#e2e-unlock-button")))
	owner.waitJS("the files under the new key", `document.getElementById('e2e-files').getAttribute('data-names') === '1'`)
	if n := run(owner, chromedp.Evaluate[int](`document.querySelectorAll('tr[data-e2e="other-key"]').length`)); n != 2 {
		t.Fatalf("%d files say they are sealed to another key after the key was replaced, want 2", n)
	}
	if msg := owner.text("#e2e-unlock-status"); !strings.Contains(msg, "another key") {
		t.Fatalf("after replacing the key the page says %q", msg)
	}

	// Throughput, measured in the same run: one 32 MiB file through a plain request
	// and through the encrypted one, from the same browser, straight to the gateway.
	owner.open("/request")
	owner.do(chromedp.SendKeys(css("#recipient_email"), "rita@example.com"), chromedp.SendKeys(css("#title"), "Plain baseline"))
	if st := owner.submit(chromedp.Click(css("#package-form button[type=submit]"))); st != http.StatusCreated {
		t.Fatalf("the plain request: %d", st)
	}
	plainLink := owner.value("#magic-link")
	big, _ := writeFile(t, "throughput.bin", 32<<20)
	timed := func(link string) time.Duration {
		t.Helper()
		recipient.open(link)
		recipient.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`))
		start := time.Now()
		recipient.do(setFiles("#files-input", []string{big}))
		recipient.waitJS("the 32 MiB upload", `!!document.querySelector('.uploads li[data-state=done]')`)
		return time.Since(start)
	}
	plainTime := timed(plainLink)
	encTime := timed(link)
	mibs := func(d time.Duration) float64 { return 32 / d.Seconds() }
	t.Logf("browser upload of 32 MiB: plain %.1f MiB/s, encrypted (age, in the page) %.1f MiB/s: %.2f× the plain throughput",
		mibs(plainTime), mibs(encTime), plainTime.Seconds()/encTime.Seconds())
}
