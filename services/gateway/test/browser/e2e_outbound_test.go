package browser

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	mrand "math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
)

// outSystem is a running gateway with the database and the bucket the end-to-end
// encryption tests read (and tamper with) behind its back.
type outSystem struct {
	base  string
	db    string
	store *storage.Store
}

func startOutSystem(t *testing.T) *outSystem {
	t.Helper()
	_, natsURL := servicetest.StartNATS(t)
	dbURL := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	st := servicetest.Bucket(t)
	gw, gwOps := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["gateway"], []string{
		"SHIPFILE_DATABASE_URL=" + dbURL, "SHIPFILE_NATS_URL=" + natsURL, "SHIPFILE_S3_BUCKET=" + st.Bucket,
		"SHIPFILE_LOG_LEVEL=warn", servicetest.SecretKeyEnv,
		"SHIPFILE_HTTP_ADDR=" + gw, "SHIPFILE_OPS_ADDR=" + gwOps, "SHIPFILE_PUBLIC_URL=http://" + gw,
	})
	servicetest.WaitReady(t, gwOps)
	return &outSystem{base: "http://" + gw, db: dbURL, store: st}
}

// object reads the stored object of a file (whichever way it was uploaded).
func (s *outSystem) object(t *testing.T, fileID string) (string, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for obj := range s.store.Client.ListObjects(ctx, s.store.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if !strings.HasSuffix(obj.Key, "/"+fileID) {
			continue
		}
		o, err := s.store.Client.GetObject(ctx, s.store.Bucket, obj.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		b, err := io.ReadAll(o)
		if err != nil {
			t.Fatal(err)
		}
		return obj.Key, b
	}
	t.Fatalf("no stored object for file %s", fileID)
	return "", nil
}

func (s *outSystem) putObject(t *testing.T, key string, b []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.store.Client.PutObject(ctx, s.store.Bucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// adminSession runs the first-visit setup and signs the tab in; it returns an API
// client with a token made on the account page.
func adminSession(t *testing.T, tb *tab, base string) servicetest.Client {
	t.Helper()
	const password = "a long admin password"
	tb.setup("admin@example.com", "Ada Admin", password)
	tb.inboundSignIn("admin@example.com", password)
	tb.open("/account")
	tb.do(chromedp.SendKeys(css("#token-name"), "e2e"))
	tb.submit(chromedp.Click(css("#token-form button[type=submit]")))
	return servicetest.Client{T: t, Base: base, Token: tb.value("#token-value")}
}

// outSession starts the system of the end-to-end tests, a browser that gives up after
// d and a tab signed in as the admin (adminSession); it returns them and the tab's API
// client.
func outSession(t *testing.T, d time.Duration) (*outSystem, context.Context, *tab, servicetest.Client) {
	t.Helper()
	sys := startOutSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	bctx := newBrowser(t, ctx)
	tb := newTab(t, bctx, sys.base)
	return sys, bctx, tb, adminSession(t, tb, sys.base)
}

// downloads records what the browser saves: every download of the tab's browser
// context goes to one folder, named by its GUID.
type downloads struct {
	tb  *tab
	dir string
}

func (tb *tab) downloadsTo(t *testing.T) *downloads {
	t.Helper()
	dir := t.TempDir()
	if _, err := chromedp.CallBrowser(tb.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, BrowserContextID: chromedp.FromContext(tb.ctx).BrowserContextID,
		DownloadPath: dir, EventsEnabled: new(true),
	}); err != nil {
		t.Fatal(err)
	}
	return &downloads{tb: tb, dir: dir}
}

// click clicks sel and waits for the download it starts to end: it returns the saved
// file's path and the final state (completed or canceled, which is also what an
// interrupted download ends as).
func (d *downloads) click(sel string, limit time.Duration) (string, browser.DownloadProgressState) {
	t := d.tb.t
	t.Helper()
	ctx, cancel := context.WithTimeout(d.tb.ctx, limit)
	defer cancel()
	progress := chromedp.BrowserEvents(ctx, browser.DownloadProgress)
	d.tb.do(chromedp.Click(css(sel)))
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("download of %s: %v", sel, err)
		}
		if ev.State == browser.DownloadProgressStateCompleted || ev.State == browser.DownloadProgressStateCanceled {
			return filepath.Join(d.dir, ev.GUID), ev.State
		}
	}
	t.Fatalf("no download from %s", sel)
	return "", ""
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sum256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// rawGet fetches path with the API token and returns the status and body.
func rawGet(t *testing.T, api servicetest.Client, path string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", api.Base+path, nil)
	req.Header.Set("Authorization", "Bearer "+api.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

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
	tb.do(chromedp.SetUploadFiles(css("#files"), paths))
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
	return pkgID, link, id, upload
}

func TestEndToEndOutbound(t *testing.T) {
	sys, bctx, sender, api := outSession(t, 8*time.Minute)

	// Three files: across age's 64 KiB chunks, one of exactly one chunk, one tiny.
	files := []*sentFile{
		{name: "Q3 report.pdf", data: randomBytes(1<<20 + 12345)},
		{name: "chunk.bin", data: randomBytes(64 << 10)},
		{name: "naïve notes.txt", data: []byte("hello, age\n")},
	}
	pkgID, link, _, _ := sendEncrypted(t, sys, sender, api, "Encrypted report", "", files)
	if !strings.Contains(link, "#AGE-SECRET-KEY-1") {
		t.Fatalf("the link shown after sending has no key: %q", link)
	}
	if note := sender.text("#e2e-sent-note"); !strings.Contains(note, "e-mailed link lacks") {
		t.Fatalf("sent note = %q", note)
	}
	sender.shot("e2e-sent")
	// The owner's page shows the real names from this browser and the key.
	sender.open("/packages/" + pkgID)
	sender.waitJS("real names", `document.querySelector('#files-table tr[data-name="chunk.bin"]')`)
	if k := sender.value("#e2e-key-value"); !strings.HasSuffix(link, "#"+k) {
		t.Fatalf("the package page's key %q is not the link's", k)
	}
	// and its downloads decrypt too.
	sdl := sender.downloadsTo(t)
	if p, st := sdl.click(`#files-table tr[data-file-id="`+files[1].id+`"] a[data-e2e-download]`, time.Minute); st != browser.DownloadProgressStateCompleted || fileSHA(t, p) != sum256(files[1].data) {
		t.Fatalf("the owner's decrypted download: %s", st)
	}
	// The archive of an encrypted package is the browser's job.
	token := link[strings.LastIndex(link, "/p/")+3 : strings.Index(link, "#")]
	if st, body := rawGet(t, api, "/api/v1/links/"+token+"/archive"); st != http.StatusConflict {
		t.Fatalf("archive: %d %s", st, body)
	}

	// The recipient, in a browser of their own, with the full link.
	bob := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	dl := bob.downloadsTo(t)
	bob.openEncrypted(link, "")
	dl.saveDecrypted(files)
	bob.shot("e2e-recipient")

	// Download all: a zip made in the browser, its entries the originals.
	path, state := dl.click("#download-all", time.Minute)
	if state != browser.DownloadProgressStateCompleted {
		t.Fatalf("download all: %s (%s)", state, bob.text("#download-all-status"))
	}
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("the zip: %v", err)
	}
	got := map[string]string{}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("zip entry %s: %v", zf.Name, err)
		}
		got[zf.Name] = sum256(b)
	}
	zr.Close()
	for _, f := range files {
		if got[f.name] != sum256(f.data) {
			t.Fatalf("zip entry %q: %s, want %s (entries %v)", f.name, got[f.name], sum256(f.data), got)
		}
	}
	if len(got) != len(files) {
		t.Fatalf("zip entries = %v", got)
	}

	// A package an API client made without a manifest (optional: docs/ENCRYPTION.md): the page shows
	// the neutral names and still decrypts with the link's key.
	goID, _ := age.GenerateX25519Identity()
	goPlain := []byte("made by a script\n")
	var goCipher bytes.Buffer
	gw, _ := age.Encrypt(&goCipher, goID.Recipient())
	_, _ = gw.Write(goPlain)
	_ = gw.Close()
	bare := api.Must("POST", "/api/v1/packages", map[string]any{"title": "No manifest", "recipient_email": "bob@example.com", "encryption": "age"}, http.StatusCreated)
	bareFile := api.Upload("/api/v1/packages/"+bare["id"].(string)+"/files", "x", goCipher.Bytes())
	bareLink := api.Must("POST", "/api/v1/packages/"+bare["id"].(string)+"/finalize", nil, http.StatusOK)["magic_link"].(string)
	bob.open(bareLink + "#" + goID.String())
	bob.waitJS("the opened files", `document.querySelector('#e2e-link[data-e2e-state=open]')`)
	bsel := `#files li[data-file-id="` + bareFile["id"].(string) + `"]`
	if got := bob.text(bsel + " .file-name"); got != "file-1.age" {
		t.Fatalf("a file without a manifest is shown as %q", got)
	}
	if p, st := dl.click(bsel+" [data-e2e-download]", time.Minute); st != browser.DownloadProgressStateCompleted || fileSHA(t, p) != sum256(goPlain) {
		t.Fatalf("download without a manifest: %s", st)
	}

	// A wrong key, and no key: said clearly, nothing shown.
	other, _ := age.GenerateX25519Identity()
	eve := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	eve.open(link[:strings.Index(link, "#")+1] + other.String())
	eve.waitJS("the wrong key's message", `document.querySelector('#e2e-link[data-e2e-state=error]')`)
	if msg := eve.text("#e2e-error"); !strings.Contains(msg, "This key does not open these files") {
		t.Fatalf("wrong key: %q", msg)
	}
	if names := eve.text("#files"); strings.Contains(names, "chunk.bin") {
		t.Fatalf("a wrong key shows names: %q", names)
	}
	eve.shot("e2e-wrong-key")
	// The e-mailed link alone: the page asks for the key, passed on separately; a wrong
	// one says so and shows nothing.
	emailed := link[:strings.Index(link, "#")]
	eve.open(emailed)
	eve.waitJS("the key field", `document.querySelector('#e2e-link[data-e2e-state=key]') && !document.getElementById('e2e-keyform').hidden`)
	if msg := eve.text("#e2e-state"); !strings.Contains(msg, "missing its key") || !strings.Contains(msg, "paste the key") {
		t.Fatalf("no key: %q", msg)
	}
	eve.do(chromedp.SendKeys(css("#e2e-key"), other.String()), chromedp.Click(css("#e2e-key-open")))
	eve.waitJS("the pasted wrong key's message", `document.querySelector('#e2e-link[data-e2e-error=key]')`)
	if msg := eve.text("#e2e-error"); !strings.Contains(msg, "This key does not open these files") {
		t.Fatalf("a pasted wrong key: %q", msg)
	}
	if names := eve.text("#files"); strings.Contains(names, "chunk.bin") || strings.Contains(eve.location(), "#") {
		t.Fatalf("a pasted wrong key shows names (%q) or lands in the address (%s)", names, eve.location())
	}
	eve.shot("e2e-pasted-wrong-key")
	// The right key pasted: the page opens like the full link, and keeps the key in the
	// address's fragment, so a reload needs no paste.
	dave := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	ddl := dave.downloadsTo(t)
	dave.open(emailed)
	dave.waitJS("the key field", `document.querySelector('#e2e-link[data-e2e-state=key]')`)
	dave.do(chromedp.SendKeys(css("#e2e-key"), link[strings.Index(link, "#")+1:]), chromedp.Click(css("#e2e-key-open")))
	dave.waitJS("the opened files", `document.querySelector('#e2e-link[data-e2e-state=open]')`)
	if loc := dave.location(); loc != link {
		t.Fatalf("after the pasted key the address is %q, want the full link", loc)
	}
	if v := dave.value("#e2e-key"); v != "" || !run(dave, chromedp.Evaluate[bool](`document.getElementById('e2e-keyform').hidden`)) {
		t.Fatalf("the key field stays after opening (%d chars)", len(v))
	}
	ddl.saveDecrypted(files)
	dave.do(chromedp.Reload())
	dave.waitJS("the opened files after a reload", `document.querySelector('#e2e-link[data-e2e-state=open]')`)
	// The full link pasted opens too.
	dave.open(emailed)
	dave.waitJS("the key field", `document.querySelector('#e2e-link[data-e2e-state=key]')`)
	dave.do(chromedp.SendKeys(css("#e2e-key"), link), chromedp.Click(css("#e2e-key-open")))
	dave.waitJS("the opened files", `document.querySelector('#e2e-link[data-e2e-state=open]')`)

	// A tampered object: age's authentication fails, the page says the file was
	// altered, and the browser keeps no complete-looking file.
	victim := files[0]
	key, obj := sys.object(t, victim.id)
	obj[len(obj)/2] ^= 0x01
	sys.putObject(t, key, obj)
	bob.open(link)
	bob.waitJS("the opened files", `document.querySelector('#e2e-link[data-e2e-state=open]')`)
	sel := `#files li[data-file-id="` + victim.id + `"]`
	_, state = dl.click(sel+" [data-e2e-download]", time.Minute)
	if state == browser.DownloadProgressStateCompleted {
		t.Fatal("the tampered file downloaded as complete")
	}
	bob.waitJS("the altered message", `document.querySelector('`+sel+` .file-status[data-kind=altered]')`)
	if msg := bob.text(sel + " .file-status"); !strings.Contains(msg, "altered") {
		t.Fatalf("tampered: %q", msg)
	}
	bob.shot("e2e-altered")

	// Passphrase mode: the e-mailed link works with the passphrase.
	pfiles := []*sentFile{{name: "contract.txt", data: randomBytes(100_000)}}
	const pass = "correct horse battery staple"
	_, plink, _, _ := sendEncrypted(t, sys, sender, api, "Encrypted with a passphrase", pass, pfiles)
	if strings.Contains(plink, "#") {
		t.Fatalf("a passphrase link carries a fragment: %q", plink)
	}
	if note := sender.text("#e2e-sent-note"); !strings.Contains(note, "passphrase") {
		t.Fatalf("sent note = %q", note)
	}
	carol := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	cdl := carol.downloadsTo(t)
	carol.open(plink)
	carol.waitJS("the passphrase form", `document.querySelector('#e2e-link[data-e2e-state=passphrase]')`)
	carol.do(chromedp.SendKeys(css("#e2e-passphrase"), "wrong horse"), chromedp.Click(css("#e2e-open")))
	carol.waitJS("the wrong passphrase's message", `document.querySelector('#e2e-link[data-e2e-error=key]')`)
	if msg := carol.text("#e2e-error"); !strings.Contains(msg, "This passphrase does not open these files") {
		t.Fatalf("wrong passphrase: %q", msg)
	}
	carol.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('e2e-passphrase').value = ''`),
		chromedp.SendKeys(css("#e2e-passphrase"), pass), chromedp.Click(css("#e2e-open")))
	carol.waitJS("the opened files", `document.querySelector('#e2e-link[data-e2e-state=open]')`)
	cdl.saveDecrypted(pfiles)
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

// rendererMem reads a memory field of /proc/<pid>/status ("VmRSS:" resident,
// "RssAnon:" private) of each renderer process of the browser whose process is root
// (its pages and their service workers; not other browsers on the machine), in bytes
// by pid.
func rendererMem(root int, field string) map[int]int64 {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	mine := func(pid int) bool {
		for range 8 {
			if pid == root {
				return true
			}
			if pid = parent[pid]; pid <= 1 {
				return false
			}
		}
		return false
	}
	out := map[int]int64{}
	for pid := range parent {
		if !mine(pid) {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil || !bytes.Contains(cmd, []byte("--type=renderer")) {
			continue
		}
		status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(status), "\n") {
			if strings.HasPrefix(line, field) {
				kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
				out[pid] = kb * 1024
			}
		}
	}
	return out
}

// genReader is n deterministic bytes (ChaCha8 from a fixed seed), made as they are read.
type genReader struct {
	r    *mrand.ChaCha8
	left int64
}

func newGen(seed byte, n int64) *genReader {
	return &genReader{r: mrand.NewChaCha8([32]byte{seed}), left: n}
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	_, _ = g.r.Read(p)
	g.left -= int64(len(p))
	return len(p), nil
}

// TestEndToEndLargeDownload: a large encrypted file (256 MiB; 2 GiB with
// SHIPFILE_E2E_LARGE=2GiB, which make test-faults sets) made with filippo.io/age as it
// streams from a generator and uploaded through the API, then decrypted to disk by
// the recipient's page through the service worker. The renderer's private memory and
// the page's and the worker's JavaScript heaps stay bounded, and the SHA-256 of what
// the browser saved is the original's.
func TestEndToEndLargeDownload(t *testing.T) {
	size := int64(256 << 20)
	if os.Getenv("SHIPFILE_E2E_LARGE") == "2GiB" {
		size = 2 << 30
	}
	sys, bctx, _, api := outSession(t, 9*time.Minute)

	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, newGen(7, size)); err != nil {
		t.Fatal(err)
	}
	want := hex.EncodeToString(h.Sum(nil))

	pkg := api.Must("POST", "/api/v1/packages", map[string]any{"title": "Large", "recipient_email": "bob@example.com", "encryption": "age"}, http.StatusCreated)
	pkgID := pkg["id"].(string)
	upStart := time.Now()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", "large.bin")
		if err == nil {
			var ew io.WriteCloser
			if ew, err = age.Encrypt(part, id.Recipient()); err == nil {
				if _, err = io.Copy(ew, newGen(7, size)); err == nil {
					err = ew.Close()
				}
			}
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest("POST", sys.base+"/api/v1/packages/"+pkgID+"/files", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+api.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&file)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %v", resp.StatusCode, file)
	}
	upTime := time.Since(upStart)
	fileID := file["id"].(string)
	var mb bytes.Buffer
	ew, _ := age.Encrypt(&mb, id.Recipient())
	_ = json.NewEncoder(ew).Encode(map[string]any{"version": 1, "files": map[string]any{fileID: map[string]any{"name": "large.bin", "type": "application/octet-stream", "size": size}}})
	_ = ew.Close()
	mreq, _ := http.NewRequest("PUT", sys.base+"/api/v1/packages/"+pkgID+"/manifest", &mb)
	mreq.Header.Set("Content-Type", "application/octet-stream")
	mreq.Header.Set("Authorization", "Bearer "+api.Token)
	if resp, err := http.DefaultClient.Do(mreq); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT manifest: %v %v", resp, err)
	}
	fin := api.Must("POST", "/api/v1/packages/"+pkgID+"/finalize", nil, http.StatusOK)
	link := fin["magic_link"].(string) + "#" + id.String()

	bob := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	dl := bob.downloadsTo(t)
	bob.open(link)
	bob.waitJS("the opened files", `document.querySelector('#e2e-link[data-e2e-state=open]')`)
	if _, err := chromedp.Call(bob.ctx, performance.Enable, performance.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	mem := sampleMemory(t, bctx, bob)
	start := time.Now()
	path, state := dl.click(`#files li[data-file-id="`+fileID+`"] [data-e2e-download]`, 8*time.Minute)
	took := time.Since(start)
	peak := mem.stop()
	if state != browser.DownloadProgressStateCompleted {
		t.Fatalf("download: %s (%s)", state, bob.text("#files .file-status"))
	}
	if got := fileSHA(t, path); got != want {
		t.Fatalf("downloaded SHA-256 %s, want %s", got, want)
	}
	mib := func(n float64) float64 { return n / (1 << 20) }
	t.Logf("%d MiB: upload (Go, encrypting) %.1f s; browser decrypt to disk %.1f s (%.1f MiB/s); renderer growth: resident %.0f MiB, private %.0f MiB (peaks %.0f, %.0f MiB); JS heap peaks: page %.1f MiB, worker %.1f MiB",
		size>>20, upTime.Seconds(), took.Seconds(), mib(float64(size))/took.Seconds(), mib(float64(peak.rss)), mib(float64(peak.anon)),
		mib(float64(peak.rssMax)), mib(float64(peak.anonMax)), mib(peak.pageHeap), mib(peak.workerHeap))
	// Bounded: the file's bytes never pile up anywhere in the renderer (256 MiB would
	// be the whole default file).
	if peak.rss > 128<<20 || peak.pageHeap > 64<<20 || peak.workerHeap > 64<<20 {
		t.Fatalf("memory not bounded: renderer grew %.0f MiB resident, page heap %.1f MiB, worker heap %.1f MiB", mib(float64(peak.rss)), mib(peak.pageHeap), mib(peak.workerHeap))
	}
	if peak.workerHeap == 0 {
		t.Fatal("the worker's heap was never measured")
	}
}

type memPeak struct {
	// rss and anon are the largest growth of one renderer's resident and private
	// memory over what it had when sampling began; rssMax and anonMax its peaks.
	rss, anon, rssMax, anonMax int64
	pageHeap, workerHeap       float64
}

type memSampler struct {
	done chan struct{}
	out  chan memPeak
}

func (m *memSampler) stop() memPeak {
	close(m.done)
	return <-m.out
}

// sampleMemory samples, every 250 ms until stopped, the renderers' memory (/proc), the
// page's JSHeapUsedSize (CDP Performance.getMetrics) and the download worker's used
// heap (Runtime.getHeapUsage in the service worker's target, attached once it runs).
func sampleMemory(t *testing.T, bctx context.Context, page *tab) *memSampler {
	m := &memSampler{done: make(chan struct{}), out: make(chan memPeak, 1)}
	go func() {
		var p memPeak
		var worker context.Context
		root := chromedp.FromContext(bctx).Browser.Process().Pid
		rss0, anon0 := rendererMem(root, "VmRSS:"), rendererMem(root, "RssAnon:")
		defer func() { m.out <- p }()
		grow := func(now, base map[int]int64, growth, peak *int64) {
			for pid, n := range now {
				*peak = max(*peak, n)
				if b, ok := base[pid]; ok {
					*growth = max(*growth, n-b)
				} else {
					*growth = max(*growth, n) // a renderer started meanwhile: all of it
				}
			}
		}
		for {
			select {
			case <-m.done:
				return
			case <-time.After(250 * time.Millisecond):
			}
			grow(rendererMem(root, "VmRSS:"), rss0, &p.rss, &p.rssMax)
			grow(rendererMem(root, "RssAnon:"), anon0, &p.anon, &p.anonMax)
			if res, err := chromedp.Call(page.ctx, performance.GetMetrics, cdp.Empty{}); err == nil {
				for _, x := range res.Metrics {
					if x.Name == "JSHeapUsedSize" {
						p.pageHeap = max(p.pageHeap, x.Value)
					}
				}
			}
			if worker == nil {
				targets, err := chromedp.Targets(bctx)
				if err != nil {
					continue
				}
				for _, ti := range targets {
					if ti.Type == "service_worker" && strings.HasSuffix(ti.URL, "/sw-e2e.js") {
						wctx, cancel := chromedp.NewContext(bctx, chromedp.WithTargetID(ti.TargetID))
						t.Cleanup(cancel)
						worker = wctx
					}
				}
			}
			if worker != nil {
				if res, err := chromedp.Call(worker, runtime.GetHeapUsage, cdp.Empty{}); err == nil {
					p.workerHeap = max(p.workerHeap, res.UsedSize)
				}
			}
		}
	}()
	return m
}

// TestEndToEndThroughput (SHIPFILE_E2E_BENCH=1; SHIPFILE_E2E_BENCH_MIB sets the size,
// 256 by default) measures in the browser, in one run: the upload of one file through
// the draft's page, plain and encrypted, and its download from the recipient's page,
// plain (the browser's own download of the link's file) and decrypted through the
// service worker. It logs the throughputs and the ratios encrypted/plain
// (docs/BENCHMARKS.md).
func TestEndToEndThroughput(t *testing.T) {
	if os.Getenv("SHIPFILE_E2E_BENCH") == "" {
		t.Skip("set SHIPFILE_E2E_BENCH=1 to measure")
	}
	mib := 256
	if v, err := strconv.Atoi(os.Getenv("SHIPFILE_E2E_BENCH_MIB")); err == nil && v > 0 {
		mib = v
	}
	sys, bctx, sender, api := outSession(t, 9*time.Minute)
	data := randomBytes(mib << 20)
	path := filepath.Join(t.TempDir(), "data.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}

	// Plain: the same pages without encryption.
	sender.open("/send")
	sender.do(chromedp.SendKeys(css("#recipient_email"), "bob@example.com"), chromedp.SendKeys(css("#title"), "Plain"))
	sender.submit(chromedp.Click(css("#package-form button[type=submit]")))
	sender.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`))
	start := time.Now()
	sender.do(chromedp.SetUploadFiles(css("#files"), []string{path}))
	sender.waitJS("the plain upload", `document.querySelector('.uploads li[data-state=done]')`)
	plainUp := time.Since(start)
	sender.open(sender.location())
	sender.submit(chromedp.Click(css("#finalize")))
	plainLink := sender.value("#magic-link")

	enc := []*sentFile{{name: "data.bin", data: data}}
	_, encLink, _, encUp := sendEncrypted(t, sys, sender, api, "Encrypted", "", enc)

	bob := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	dl := bob.downloadsTo(t)
	bob.open(plainLink)
	start = time.Now()
	p, state := dl.click("#files li a.btn", 5*time.Minute)
	plainDown := time.Since(start)
	if state != browser.DownloadProgressStateCompleted || fileSHA(t, p) != sum256(data) {
		t.Fatalf("plain download: %s", state)
	}
	bob.open(encLink)
	bob.waitJS("the opened files", `document.querySelector('#e2e-link[data-e2e-state=open]')`)
	start = time.Now()
	p, state = dl.click(`#files li[data-file-id="`+enc[0].id+`"] [data-e2e-download]`, 5*time.Minute)
	encDown := time.Since(start)
	if state != browser.DownloadProgressStateCompleted || fileSHA(t, p) != sum256(data) {
		t.Fatalf("encrypted download: %s", state)
	}
	rate := func(d time.Duration) float64 { return float64(mib) / d.Seconds() }
	t.Logf("%d MiB in the browser: upload plain %.1f MiB/s, encrypted %.1f MiB/s (%.2fx); download plain %.1f MiB/s, decrypted %.1f MiB/s (%.2fx)",
		mib, rate(plainUp), rate(encUp), plainUp.Seconds()/encUp.Seconds(), rate(plainDown), rate(encDown), plainDown.Seconds()/encDown.Seconds())
}

// TestEndToEndUploadSurvivesDrop: an encrypted upload goes through tus like a plain one,
// so within the page it survives the network going away mid-PATCH: the page is opened
// through a proxy that slows uploads to 3 MB/s; once 2 MiB are sent the browser goes
// offline for 1.5 s and the proxy cuts the PATCH in flight. tus-js-client asks where
// the gateway stands and goes on from the ciphertext it still holds; the stored object
// decrypts to the file.
func TestEndToEndUploadSurvivesDrop(t *testing.T) {
	sys, _, sender, api := outSession(t, 4*time.Minute)
	proxy := slowUploads(t, strings.TrimPrefix(sys.base, "http://"), 3e6)
	slow := "http://" + proxy.addr
	sender.open(slow + "/send")
	sender.do(
		chromedp.SendKeys(css("#recipient_email"), "bob@example.com"),
		chromedp.SendKeys(css("#title"), "Over a bad network"),
		chromedp.Click(css("#encryption")),
	)
	sender.submit(chromedp.Click(css("#package-form button[type=submit]")))
	loc := sender.location()
	pkgID := loc[strings.LastIndex(loc, "/")+1:]
	sender.waitJS("the encrypting zone", `document.querySelector('#dropzone[data-e2e-ready]')`)
	throttle := func(offline bool) {
		t.Helper()
		if _, err := chromedp.Call(sender.ctx, emulateNetworkConditions, networkConditions{
			Offline: offline, DownloadThroughput: 1e9, UploadThroughput: 1e9,
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := chromedp.Call(sender.ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	throttle(false)
	data := randomBytes(12 << 20)
	path := filepath.Join(t.TempDir(), "survey.csv")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sender.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`),
		chromedp.SetUploadFiles(css("#files"), []string{path}))
	sender.waitJS("2 MiB sent", `Number((document.querySelector('.uploads li') || {getAttribute: () => 0}).getAttribute('data-sent')) >= 2097152`)
	throttle(true)
	proxy.drop()
	time.Sleep(1500 * time.Millisecond) // the network is away for this long
	throttle(false)
	sender.waitJS("the encrypted upload to finish after the drop", `document.querySelector('.uploads li[data-state=done][data-encrypted][data-retried]') || document.querySelector('.uploads li[data-state=error]')`)
	if errs := run(sender, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('.uploads li[data-state=error] .stats')).map(e => e.textContent).join('; ')`)); errs != "" {
		t.Fatalf("the upload failed: %s", errs)
	}

	raw := run(sender, chromedp.Evaluate[string](`localStorage.getItem('shipfile-e2e:' + `+jsString(pkgID)+`) || ''`))
	var kept struct {
		Identity string
		Files    map[string]struct{ Name string }
	}
	if err := json.Unmarshal([]byte(raw), &kept); err != nil || len(kept.Files) != 1 {
		t.Fatalf("kept: %q %v", raw, err)
	}
	id, err := age.ParseX25519Identity(kept.Identity)
	if err != nil {
		t.Fatal(err)
	}
	for fid := range kept.Files {
		_, obj := sys.object(t, fid)
		r, err := age.Decrypt(bytes.NewReader(obj), id)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(plain, data) {
			t.Fatalf("the resumed upload's object decrypts to other bytes (%v)", err)
		}
	}
	if st, _ := rawGet(t, api, "/api/v1/packages/"+pkgID+"/manifest"); st != http.StatusOK {
		t.Fatalf("manifest: %d", st)
	}
}
