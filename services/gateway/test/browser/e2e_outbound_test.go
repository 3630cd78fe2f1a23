package browser

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/chromedp/cdproto/browser"
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
