package browser

import (
	"bytes"
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
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

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
	sender.do(setFiles("#files", []string{path}))
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
		setFiles("#files", []string{path}))
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
