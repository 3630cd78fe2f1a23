package browser

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// sentFile is a file the test sends, with what the browser should give back.
type sentFile struct {
	name string
	data []byte
	id   string
}

// sendEncrypted fills the send form with end-to-end encryption (a passphrase when
// passphrase is not empty), uploads the files through the page and sends the
// package. It returns the package id, the link shown after sending and the files with
// their ids (from the manifest the page stored, decrypted with key).
func sendEncrypted(t *testing.T, sys *outSystem, tb *tab, api servicetest.Client, title, passphrase string, files []*sentFile) (pkgID, link string, id age.Identity, upload time.Duration) {
	t.Helper()
	tb.open("/send")
	tb.do(
		chromedp.SendKeys(css("#recipient_email"), "bob@example.com"),
		chromedp.SendKeys(css("#title"), title),
		chromedp.Click(css("#encryption")),
	)
	if passphrase != "" {
		tb.do(chromedp.Click(css("#e2e-mode-passphrase")), chromedp.SendKeys(css("#e2e-passphrase"), passphrase))
	}
	tb.submit(chromedp.Click(css("#package-form button[type=submit]")))
	loc := tb.location()
	pkgID = loc[strings.LastIndex(loc, "/")+1:]
	tb.waitJS("the encrypting zone", `document.querySelector('#dropzone[data-e2e-ready]')`)
	if got := tb.text("#e2e-badge"); got != "end-to-end encrypted" {
		t.Fatalf("badge = %q", got)
	}
	dir := t.TempDir()
	var paths []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	tb.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`))
	start := time.Now()
	tb.do(setFiles("#files", paths))
	tb.waitJS("the encrypted uploads", `document.querySelectorAll('.uploads li[data-state=done]').length === `+strconv.Itoa(len(files))+` || document.querySelector('.uploads li[data-state=error]')`)
	if errs := run(tb, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('.uploads li[data-state=error] .stats')).map(e => e.textContent).join('; ')`)); errs != "" {
		t.Fatalf("uploads failed: %s", errs)
	}
	upload = time.Since(start)

	// The key: in this browser only.
	if passphrase == "" {
		raw := run(tb, chromedp.Evaluate[string](`localStorage.getItem('shipfile-e2e:' + `+jsString(pkgID)+`) || ''`))
		var kept struct{ Identity string }
		if err := json.Unmarshal([]byte(raw), &kept); err != nil || !strings.HasPrefix(kept.Identity, "AGE-SECRET-KEY-1") {
			t.Fatalf("the browser keeps no identity for the package: %q", raw)
		}
		x, err := age.ParseX25519Identity(kept.Identity)
		if err != nil {
			t.Fatal(err)
		}
		id = x
	} else {
		s, err := age.NewScryptIdentity(passphrase)
		if err != nil {
			t.Fatal(err)
		}
		id = s
	}

	// The manifest on the server decrypts with the key to the names, types and sizes.
	st, mb := rawGet(t, api, "/api/v1/packages/"+pkgID+"/manifest")
	if st != http.StatusOK {
		t.Fatalf("GET manifest: %d %s", st, mb)
	}
	r, err := age.Decrypt(bytes.NewReader(mb), id)
	if err != nil {
		t.Fatalf("the manifest does not decrypt with the key: %v", err)
	}
	var manifest struct {
		Version int `json:"version"`
		Files   map[string]struct {
			Name string `json:"name"`
			Type string `json:"type"`
			Size int64  `json:"size"`
		} `json:"files"`
	}
	if err := json.NewDecoder(r).Decode(&manifest); err != nil || manifest.Version != 1 {
		t.Fatalf("manifest: %v %+v", err, manifest)
	}
	for fid, m := range manifest.Files {
		for _, f := range files {
			if f.name == m.Name {
				if m.Size != int64(len(f.data)) {
					t.Fatalf("manifest size of %s = %d, want %d", f.name, m.Size, len(f.data))
				}
				f.id = fid
			}
		}
	}

	// The server knows neutral names and ciphertext only.
	pkg := api.Must("GET", "/api/v1/packages/"+pkgID, nil, http.StatusOK)
	if pkg["encryption"] != "age" {
		t.Fatalf("package encryption = %v", pkg["encryption"])
	}
	for _, f := range files {
		if f.id == "" {
			t.Fatalf("the manifest lacks %s: %+v", f.name, manifest)
		}
		_, obj := sys.object(t, f.id)
		if bytes.Equal(obj, f.data) || bytes.Contains(obj, []byte(f.name)) || !bytes.HasPrefix(obj, []byte("age-encryption.org/v1\n")) {
			t.Fatalf("the stored object of %s is not an age file of its own", f.name)
		}
		r, err := age.Decrypt(bytes.NewReader(obj), id)
		if err != nil {
			t.Fatalf("the stored object of %s does not decrypt: %v", f.name, err)
		}
		plain, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(plain, f.data) {
			t.Fatalf("the stored object of %s decrypts to other bytes (%v)", f.name, err)
		}
	}
	body, _ := json.Marshal(pkg)
	for _, f := range files {
		if strings.Contains(string(body), f.name) {
			t.Fatalf("the server knows the name %s: %s", f.name, body)
		}
	}

	// Send; the page shows the link to pass on.
	tb.open("/packages/" + pkgID)
	tb.waitJS("the encrypting zone", `document.querySelector('#dropzone[data-e2e-ready]')`)
	if st := tb.submit(chromedp.Click(css("#finalize"))); st != http.StatusOK {
		t.Fatalf("finalize: %d", st)
	}
	tb.waitJS("the note about the key", `!document.getElementById('e2e-sent-note').hidden`)
	link = tb.value("#magic-link")
	// The server's QR code of the link lacks the key: the page hides it when the link
	// to pass on carries one.
	if hidden := run(tb, chromedp.Evaluate[bool](`document.querySelector('.qr-box').hidden`)); hidden != strings.Contains(link, "#") {
		t.Fatalf("QR code hidden: %v, for a link %s a key", hidden, map[bool]string{true: "with", false: "without"}[strings.Contains(link, "#")])
	}
	return pkgID, link, id, upload
}

// openEncrypted opens the link of an encrypted package in the tab, types passphrase
// when it is not empty (the page asks for it), and waits for the page to open the
// files with the link's key or the passphrase.
func (tb *tab) openEncrypted(link, passphrase string) {
	tb.t.Helper()
	tb.open(link)
	if passphrase != "" {
		tb.waitJS("the passphrase form", `document.querySelector('#e2e-link[data-e2e-state=passphrase]')`)
		tb.do(chromedp.SendKeys(css("#e2e-passphrase"), passphrase), chromedp.Click(css("#e2e-open")))
	}
	tb.waitJS("the opened files", `document.querySelector('#e2e-link[data-e2e-state=open]') || document.querySelector('#e2e-link[data-e2e-state=error]')`)
	if st := run(tb, chromedp.Evaluate[string](`document.getElementById('e2e-link').dataset.e2eState`)); st != "open" {
		tb.t.Fatalf("the page did not open the files: %s", tb.text("#e2e-error"))
	}
}

// saveDecrypted downloads each file through the opened link's page (decrypted in the
// browser, to disk) and checks the name the page shows (the manifest's) and the SHA-256
// of what the browser saved against the original.
func (d *downloads) saveDecrypted(files []*sentFile) {
	t := d.tb.t
	t.Helper()
	for i, f := range files {
		sel := `#files li[data-file-id="` + f.id + `"]`
		if got := d.tb.text(sel + " .file-name"); got != f.name {
			t.Fatalf("file %d shown as %q, want %q", i, got, f.name)
		}
		path, state := d.click(sel+" [data-e2e-download]", time.Minute)
		if state != browser.DownloadProgressStateCompleted {
			t.Fatalf("download of %s: %s (%s)", f.name, state, d.tb.text(sel+" .file-status"))
		}
		if got := fileSHA(t, path); got != sum256(f.data) {
			t.Fatalf("%s downloaded with SHA-256 %s, want %s", f.name, got, sum256(f.data))
		}
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>9)
	}
	// Not compressible in a way that matters here; distinct per file size.
	h := sha256.Sum256([]byte{byte(n), byte(n >> 8), byte(n >> 16)})
	for i := range b {
		b[i] ^= h[i%32]
	}
	return b
}
