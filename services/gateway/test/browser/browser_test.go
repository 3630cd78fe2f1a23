// Package browser drives the web UI in headless Chromium (chromedp) against the real
// gateway and webhook dispatcher binaries, on real PostgreSQL, MinIO and a private
// NATS server: setup, sign-in, an API token, a package sent with two files, the
// recipient's download, revoke and the 410 page; an inbound request filled through
// the recipient's page; a webhook created and tested from the admin pages. It writes
// screenshots of the main pages to test-output/screenshots (SHIPFILE_SCREENSHOT_DIR).
package browser

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// bins are the binaries built once for the package's tests.
var bins map[string]string

func TestMain(m *testing.M) {
	servicetest.RunWithBinaries(m, &bins, map[string]string{
		"gateway":  "../../cmd/gateway",
		"webhooks": "../../../webhooks/cmd/webhooks",
	})
}

// hook is one request the webhook receiver got.
type hook struct {
	event, delivery, signature string
	body                       []byte
}

type receiver struct {
	mu  sync.Mutex
	got []hook
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.got = append(r.got, hook{event: req.Header.Get("X-Service-Event"), delivery: req.Header.Get("X-Service-Delivery"),
		signature: req.Header.Get("X-Service-Signature"), body: body})
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) events(name string) []hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []hook
	for _, h := range r.got {
		if h.event == name {
			out = append(out, h)
		}
	}
	return out
}

// system is a running gateway and dispatcher.
type system struct {
	base string
	rcv  *receiver
	hook string // the receiver's URL
}

func startSystem(t *testing.T) *system {
	t.Helper()
	_, natsURL := servicetest.StartNATS(t)
	dbURL := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	bucket := "browser-" + strings.ToLower(rand.Text()[:12])
	common := []string{
		"SHIPFILE_DATABASE_URL=" + dbURL, "SHIPFILE_NATS_URL=" + natsURL, "SHIPFILE_S3_BUCKET=" + bucket,
		"SHIPFILE_WEBHOOK_ALLOW_PRIVATE=true", "SHIPFILE_LOG_LEVEL=warn", servicetest.SecretKeyEnv,
	}
	gw, gwOps := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["gateway"], append(common, "SHIPFILE_HTTP_ADDR="+gw, "SHIPFILE_OPS_ADDR="+gwOps, "SHIPFILE_PUBLIC_URL=http://"+gw))
	servicetest.WaitReady(t, gwOps)
	wh := servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["webhooks"], append(common, "SHIPFILE_WEBHOOKS_ADDR="+wh, "SHIPFILE_WEBHOOK_RETRY_SCHEDULE=200ms,200ms,200ms,200ms,200ms,200ms,200ms"))
	servicetest.WaitReady(t, wh)
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	return &system{base: "http://" + gw, rcv: rcv, hook: srv.URL + "/hook"}
}

// chromium finds Debian's Chromium; a test without it fails (make test installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("SHIPFILE_CHROMIUM"), "chromium", "chromium-browser", "/usr/bin/chromium"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("Chromium is not installed: apt-get install chromium (make test installs it), or set SHIPFILE_CHROMIUM")
	return ""
}

// newBrowser starts headless Chromium with the flags that work in this sandbox.
func newBrowser(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	alloc, cancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancel)
	bctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		t.Fatalf("start Chromium: %v", err)
	}
	return bctx
}

// tab is one browser tab (in its own browser context when isolated, as a second
// person's browser is), with its page errors collected.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu       sync.Mutex
	problems []string
}

func newTab(t *testing.T, parent context.Context, base string, opts ...chromedp.ContextOption) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(parent, opts...)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	tb := &tab{t: t, ctx: ctx, base: base}
	logs := chromedp.Events(ctx, cdplog.EntryAdded)
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev, err := range logs {
			if err != nil {
				return
			}
			e := ev.Entry
			// ReDoc's footer shows a logo from its CDN: the policy blocking it is the
			// point (the docs load nothing from elsewhere).
			if e != nil && strings.Contains(e.Text, "https://cdn.redoc.ly/") {
				continue
			}
			if e != nil && (e.Source == cdplog.EntrySourceSecurity || e.Source == cdplog.EntrySourceJavascript ||
				strings.Contains(e.Text, "Content Security Policy")) {
				tb.mu.Lock()
				tb.problems = append(tb.problems, fmt.Sprintf("%s %s: %s (%s)", e.Source, e.Level, e.Text, e.URL))
				tb.mu.Unlock()
			}
		}
	}()
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.problems = append(tb.problems, "exception: "+ev.ExceptionDetails.Text)
			tb.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		for _, p := range tb.problems {
			t.Errorf("page problem: %s", p)
		}
	})
	return tb
}

func (tb *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, steps...); err != nil {
		tb.t.Fatalf("browser: %v", err)
	}
}

// submit runs the steps (a click that submits a form) and returns the status of the
// page that loads.
func (tb *tab) submit(steps ...chromedp.Action[chromedp.Void]) int64 {
	tb.t.Helper()
	resp, err := chromedp.RunResponse(tb.ctx, steps...)
	if err != nil {
		tb.t.Fatalf("browser: %v", err)
	}
	return resp.Status
}

// open navigates to path (or a full URL) and returns the HTTP status.
func (tb *tab) open(path string) int64 {
	tb.t.Helper()
	if !strings.HasPrefix(path, "http") {
		path = tb.base + path
	}
	resp, err := chromedp.Run(tb.ctx, chromedp.NavigateResponse(path))
	if err != nil {
		tb.t.Fatalf("open %s: %v", path, err)
	}
	return resp.Status
}

func run[T any](tb *tab, a chromedp.Action[T]) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, a)
	if err != nil {
		tb.t.Fatalf("browser: %v", err)
	}
	return v
}

// setup creates the first admin on /setup.
func (tb *tab) setup(email, name, password string) {
	tb.t.Helper()
	tb.open("/setup")
	tb.do(
		chromedp.SendKeys(css("#email"), email),
		chromedp.SendKeys(css("#name"), name),
		chromedp.SendKeys(css("#password"), password),
		chromedp.SendKeys(css("#password_again"), password),
	)
	tb.submit(chromedp.Click(css("form button[type=submit]")))
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return run(tb, chromedp.Text(chromedp.CSS(sel)))
}

func (tb *tab) value(sel string) string {
	tb.t.Helper()
	return run(tb, chromedp.Value(chromedp.CSS(sel)))
}

func (tb *tab) location() string { tb.t.Helper(); return run(tb, chromedp.Location()) }

// waitJS evaluates a JavaScript predicate until it holds, also across the page's
// own reloads.
func (tb *tab) waitJS(what, expr string) {
	tb.t.Helper()
	var last error
	servicetest.WaitFor(tb.t, 30*time.Second, what, func() bool {
		ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		last = err
		return err == nil && ok
	})
	_ = last
}

// shot writes a full-page PNG of the tab to the screenshot folder.
func (tb *tab) shot(name string) {
	tb.t.Helper()
	png := run(tb, chromedp.FullScreenshot(100))
	dir := screenshotDir(tb.t)
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

var (
	shotDirOnce sync.Once
	shotDir     string
)

// screenshotDir is SHIPFILE_SCREENSHOT_DIR or test-output/screenshots at the root of
// the repository (git-ignored).
func screenshotDir(t *testing.T) string {
	shotDirOnce.Do(func() {
		shotDir = os.Getenv("SHIPFILE_SCREENSHOT_DIR")
		if shotDir == "" {
			dir, _ := os.Getwd()
			for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
				if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
					dir = d
					break
				}
			}
			shotDir = filepath.Join(dir, "test-output", "screenshots")
		}
		_ = os.MkdirAll(shotDir, 0o755)
	})
	return shotDir
}

// writeFile makes a file of n random bytes and returns its path and SHA-256.
func writeFile(t *testing.T, name string, n int) (string, string) {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return p, hex.EncodeToString(sum[:])
}

func css(s string) chromedp.CSS { return chromedp.CSS(s) }

// proxy is a TCP proxy that slows what clients send.
type proxy struct {
	addr  string
	mu    sync.Mutex
	conns map[net.Conn]bool
	// With cutAfter > 0, once that many bytes went through from the clients, every
	// connection is cut and new ones are refused until down, once.
	cutAfter, total int
	cut             bool
	down            time.Time
}

// drop cuts every open connection, as a network that goes away does.
func (p *proxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// slowUploads starts a TCP proxy to target that passes what the client sends at
// bytesPerSecond.
func slowUploads(t *testing.T, target string, bytesPerSecond int) *proxy {
	return throttle(t, target, bytesPerSecond, 0)
}

// cutOnce starts a TCP proxy to target that passes what clients send at
// bytesPerSecond and, once cutAfter bytes went through from the clients, cuts every
// connection and refuses new ones for 1.5 s, once: a network that goes away in the
// middle of an upload, at a point the test chooses. (Chromium sends a request again by
// itself when a reused connection breaks, on another open one or a new one, so cutting
// one connection alone can go unnoticed by the page.)
func cutOnce(t *testing.T, target string, bytesPerSecond, cutAfter int) string {
	return throttle(t, target, bytesPerSecond, cutAfter).addr
}

// throttle starts the proxy of slowUploads and cutOnce (cutAfter 0: no cut).
func throttle(t *testing.T, target string, bytesPerSecond, cutAfter int) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &proxy{addr: ln.Addr().String(), conns: map[net.Conn]bool{}, cutAfter: cutAfter}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			away := time.Now().Before(p.down)
			if !away {
				p.conns[c] = true
			}
			p.mu.Unlock()
			if away {
				c.Close()
				continue
			}
			go func() {
				defer func() {
					c.Close()
					p.mu.Lock()
					delete(p.conns, c)
					p.mu.Unlock()
				}()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(c, up); c.Close() }()
				buf := make([]byte, 16<<10)
				start, sent := time.Now(), 0
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if p.count(n) {
							return // both ends close: the request in flight breaks off
						}
						if _, werr := up.Write(buf[:n]); werr != nil {
							return
						}
						sent += n
						if ahead := time.Duration(float64(sent)/float64(bytesPerSecond)*float64(time.Second)) - time.Since(start); ahead > 0 {
							time.Sleep(ahead)
						}
					}
					if err != nil {
						if tc, ok := up.(*net.TCPConn); ok {
							_ = tc.CloseWrite()
						}
						return
					}
				}
			}()
		}
	}()
	return p
}

// count adds n bytes from a client and says whether that made the cut: then every
// connection, idle ones too, is closed (Chromium would send the request again on one
// of those) and the network stays away for 1.5 s.
func (p *proxy) count(n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total += n
	if p.cutAfter <= 0 || p.cut || p.total < p.cutAfter {
		return false
	}
	p.cut, p.down = true, time.Now().Add(1500*time.Millisecond)
	for o := range p.conns {
		o.Close()
	}
	return true
}

// networkConditions are the parameters of Network.emulateNetworkConditions, which
// throttles uploads (and fails the requests in flight when going offline); cdproto
// dropped the deprecated command, so it is named here.
type networkConditions struct {
	Offline            bool    `json:"offline"`
	Latency            float64 `json:"latency"`
	DownloadThroughput float64 `json:"downloadThroughput"`
	UploadThroughput   float64 `json:"uploadThroughput"`
}

var emulateNetworkConditions = cdp.Command[networkConditions, cdp.Empty]{Method: "Network.emulateNetworkConditions"}

func TestWebUI(t *testing.T) {
	sys := startSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bctx := newBrowser(t, ctx)
	admin := newTab(t, bctx, sys.base)
	recipient := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	const password = "a long admin password"

	// Setup: the first visit goes to /setup, which creates the first admin.
	admin.open("/")
	if loc := admin.location(); !strings.HasSuffix(loc, "/setup") {
		t.Fatalf("first visit landed on %s, want /setup", loc)
	}
	admin.do(
		chromedp.SendKeys(css("#email"), "admin@example.com"),
		chromedp.SendKeys(css("#name"), "Ada Admin"),
		chromedp.SendKeys(css("#password"), password),
		chromedp.SendKeys(css("#password_again"), password),
	)
	admin.shot("setup")
	if st := admin.submit(chromedp.Click(css("form button[type=submit]"))); st != http.StatusOK {
		t.Fatalf("setup answered %d", st)
	}
	if st := admin.open("/setup"); st != http.StatusNotFound {
		t.Fatalf("/setup after setup: %d, want 404", st)
	}

	// Sign in.
	admin.open("/login")
	admin.do(chromedp.SendKeys(css("#email"), "admin@example.com"), chromedp.SendKeys(css("#password"), password))
	admin.shot("login")
	admin.submit(chromedp.Click(css("form button[type=submit]")))
	admin.do(chromedp.WaitVisible(css(".card.empty")))
	if name := admin.text(".me a"); name != "Ada Admin" {
		t.Fatalf("signed in as %q", name)
	}

	// Account → API tokens: the raw token is shown once and works.
	admin.open("/account")
	admin.do(chromedp.SendKeys(css("#token-name"), "ci"))
	if st := admin.submit(chromedp.Click(css("#token-form button[type=submit]"))); st != http.StatusCreated {
		t.Fatalf("create token: %d", st)
	}
	token := admin.value("#token-value")
	if !strings.HasPrefix(token, "sf_") || len(token) != 46 {
		t.Fatalf("token = %q", token)
	}
	admin.shot("tokens")
	api := servicetest.Client{T: t, Base: sys.base, Token: token}
	if st, me := api.Call("GET", "/api/v1/me", nil); st != http.StatusOK || me["email"] != "admin@example.com" {
		t.Fatalf("the token: %d %v", st, me)
	}
	if rows := run(admin, chromedp.Evaluate[int](`document.querySelectorAll('#tokens tbody tr').length`)); rows != 1 {
		t.Fatalf("token rows = %d", rows)
	}

	// Send files: bad input comes back beside the field and creates nothing.
	admin.open("/send")
	admin.do(
		chromedp.SendKeys(css("#recipient_email"), "bob@example.com"),
		chromedp.SendKeys(css("#recipient_name"), "Bob"),
		chromedp.SendKeys(css("#title"), "Q3 report"),
		chromedp.SendKeys(css("#note"), "Hi Bob,\nhere are the figures."),
		chromedp.SetValue(css("#ttl_days"), "91"),
	)
	if st := admin.submit(chromedp.Click(css("#package-form button[type=submit]"))); st != http.StatusUnprocessableEntity {
		t.Fatalf("ttl 91: %d, want 422", st)
	}
	if msg := admin.text("#ttl_days-error"); !strings.Contains(msg, "between 1 and 90") {
		t.Fatalf("ttl error = %q", msg)
	}
	if v := admin.value("#title"); v != "Q3 report" {
		t.Fatalf("the form lost the title: %q", v)
	}
	admin.shot("send-error")
	if _, list := api.Call("GET", "/api/v1/packages", nil); len(list["items"].([]any)) != 0 {
		t.Fatalf("a bad form created a package: %v", list)
	}
	admin.do(chromedp.SetValue(css("#ttl_days"), "5"))
	admin.submit(chromedp.Click(css("#package-form button[type=submit]")))
	pkgURL := admin.location()

	// Two files, each with its own progress bar, bytes and throughput.
	big, bigSum := writeFile(t, "figures.bin", 6<<20)
	small, smallSum := writeFile(t, "summary.txt", 20<<10)
	// Keep the finished uploads on screen for the screenshot; the page reloads
	// itself otherwise.
	admin.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`),
		chromedp.SetUploadFiles(css("#files"), []string{big, small}))
	admin.waitJS("both uploads", `document.querySelectorAll('.uploads li[data-state=done]').length === 2`)
	stats := admin.text(".uploads li:first-child .stats")
	if !strings.Contains(stats, "6.0 MiB") || !strings.Contains(stats, "/s") {
		t.Fatalf("upload stats = %q, want size and throughput", stats)
	}
	admin.shot("upload")
	admin.open(pkgURL)
	if n := run(admin, chromedp.Evaluate[int](`document.querySelectorAll('#files-table tbody tr').length`)); n != 2 {
		t.Fatalf("file rows = %d", n)
	}
	body := admin.text("#files-table")
	if !strings.Contains(body, bigSum) || !strings.Contains(body, smallSum) {
		t.Fatalf("the page does not show both SHA-256 sums:\n%s", body)
	}
	admin.shot("package-draft")
	if st := admin.submit(chromedp.Click(css("#finalize"))); st != http.StatusOK {
		t.Fatalf("finalize: %d", st)
	}
	link := admin.value("#magic-link")
	if !strings.HasPrefix(link, sys.base+"/p/") {
		t.Fatalf("magic link = %q", link)
	}
	admin.shot("sent")

	// The recipient opens the link in their own browser and downloads a file.
	if st := recipient.open(link); st != http.StatusOK {
		t.Fatalf("recipient page: %d", st)
	}
	if note := recipient.text(".note"); !strings.Contains(note, "here are the figures.") {
		t.Fatalf("note = %q", note)
	}
	recipient.shot("recipient")
	dl := t.TempDir()
	if _, err := chromedp.CallBrowser(recipient.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, BrowserContextID: chromedp.FromContext(recipient.ctx).BrowserContextID,
		DownloadPath: dl, EventsEnabled: new(true),
	}); err != nil {
		t.Fatal(err)
	}
	progress := chromedp.BrowserEvents(recipient.ctx, browser.DownloadProgress)
	recipient.do(chromedp.Click(css("#files li:first-child a.btn")))
	var guid string
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("download: %v", err)
		}
		if ev.State == browser.DownloadProgressStateCompleted {
			guid = ev.GUID
			break
		}
		if ev.State == browser.DownloadProgressStateCanceled {
			t.Fatal("download canceled")
		}
	}
	got, err := os.ReadFile(filepath.Join(dl, guid))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(got)
	if hex.EncodeToString(sum[:]) != bigSum {
		t.Fatalf("downloaded %d bytes that differ from figures.bin", len(got))
	}
	// On a phone.
	phone := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	phone.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	phone.open(link)
	phone.shot("recipient-phone")

	// The owner sees the link's use, then revokes it.
	admin.open(pkgURL)
	if uses := admin.text("#link-uses"); uses == "0" {
		t.Fatal("the link's uses are not counted")
	}
	admin.do(chromedp.Click(css("#revoke")))
	admin.do(chromedp.WaitVisible(css("#confirm")))
	admin.submit(chromedp.Click(css("#confirm")))
	if state := admin.text("#state"); state != "revoked" {
		t.Fatalf("state after revoke = %q", state)
	}
	admin.shot("package")
	if st := recipient.open(link); st != http.StatusGone {
		t.Fatalf("revoked link: %d, want 410", st)
	}
	if h := recipient.text("h1"); h != "This link is no longer available" {
		t.Fatalf("dead link page: %q", h)
	}
	recipient.shot("gone")

	// Request files: the recipient uploads through the link's drop zone.
	admin.open("/request")
	admin.do(
		chromedp.SendKeys(css("#recipient_email"), "carol@example.com"),
		chromedp.SendKeys(css("#title"), "Signed contract"),
		chromedp.SendKeys(css("#note"), "Please upload the signed copy."),
	)
	if st := admin.submit(chromedp.Click(css("#package-form button[type=submit]"))); st != http.StatusCreated {
		t.Fatalf("request: %d", st)
	}
	inLink := admin.value("#magic-link")
	contract, contractSum := writeFile(t, "contract.pdf", 12<<20)
	// The upload goes through tus and survives the network going away for a moment:
	// the page is opened through a proxy that slows uploads to 3 MB/s (Chromium does not
	// throttle uploads to a loopback address), and once 2 MiB are sent the browser goes
	// offline for 1.5 s (chromedp network emulation: requests fail, navigator.onLine is
	// false) and the proxy cuts the connection of the PATCH in flight (emulation leaves
	// a request whose body is being sent alone). tus-js-client retries, asks where the
	// gateway stands (HEAD) and goes on from there.
	proxy := slowUploads(t, strings.TrimPrefix(sys.base, "http://"), 3e6)
	recipient.open(strings.Replace(inLink, sys.base, "http://"+proxy.addr, 1))
	throttle := func(offline bool) {
		t.Helper()
		if _, err := chromedp.Call(recipient.ctx, emulateNetworkConditions, networkConditions{
			// Throughputs far above what the proxy lets through: emulation then watches
			// every request, and going offline fails those in flight.
			Offline: offline, DownloadThroughput: 1e9, UploadThroughput: 1e9,
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := chromedp.Call(recipient.ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	throttle(false)
	recipient.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`),
		chromedp.SetUploadFiles(css("#files-input"), []string{contract}))
	recipient.waitJS("2 MiB sent", `Number((document.querySelector('.uploads li') || {getAttribute: () => 0}).getAttribute('data-sent')) >= 2097152`)
	throttle(true)
	proxy.drop()
	time.Sleep(1500 * time.Millisecond) // the network is away for this long
	throttle(false)
	recipient.waitJS("the tus upload to finish after the drop", `!!document.querySelector('.uploads li[data-state=done][data-transport=tus][data-retried]')`)
	if _, err := chromedp.Call(recipient.ctx, emulateNetworkConditions, networkConditions{DownloadThroughput: -1, UploadThroughput: -1}); err != nil {
		t.Fatal(err)
	}
	// A reload midway: choosing the same file again goes on where it stopped
	// (tus-js-client finds the upload URL by the file's fingerprint).
	annex, annexSum := writeFile(t, "annex.pdf", 12<<20)
	slowLink := strings.Replace(inLink, sys.base, "http://"+proxy.addr, 1)
	recipient.open(slowLink)
	recipient.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`),
		chromedp.SetUploadFiles(css("#files-input"), []string{annex}))
	recipient.waitJS("2 MiB of the annex sent", `Number((document.querySelector('.uploads li') || {getAttribute: () => 0}).getAttribute('data-sent')) >= 2097152`)
	recipient.open(slowLink)
	recipient.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`),
		chromedp.SetUploadFiles(css("#files-input"), []string{annex}))
	recipient.waitJS("the annex to finish after the reload", `!!document.querySelector('.uploads li[data-state=done][data-resumed]')`)

	recipient.open(inLink)
	recipient.waitJS("the page to list the upload", `!!document.querySelector('#files') && document.querySelector('#files').textContent.includes('contract.pdf')`)
	recipient.shot("recipient-upload")
	_, list := api.Call("GET", "/api/v1/packages?direction=inbound", nil)
	inbound := list["items"].([]any)[0].(map[string]any)
	_, detail := api.Call("GET", "/api/v1/packages/"+inbound["id"].(string), nil)
	files := detail["files"].([]any)
	sums := map[string]bool{}
	for _, f := range files {
		if f := f.(map[string]any); f["uploaded_by"] == "recipient" {
			sums[f["sha256"].(string)] = true
		}
	}
	if len(files) != 2 || !sums[contractSum] || !sums[annexSum] {
		t.Fatalf("inbound files = %v", files)
	}

	// Settings → Webhooks: every event is checked; the secret is shown once; Test
	// reaches the receiver through the dispatcher, signed with that secret.
	admin.open("/admin/webhooks")
	if n := run(admin, chromedp.Evaluate[int](`document.querySelectorAll('#webhook-form input[name=events]:checked').length`)); n != len(events.Types) {
		t.Fatalf("checked events = %d, want all %d", n, len(events.Types))
	}
	admin.do(chromedp.SendKeys(css("#url"), sys.hook), chromedp.SendKeys(css("#description"), "CI receiver"))
	if st := admin.submit(chromedp.Click(css("#webhook-form button[type=submit]"))); st != http.StatusCreated {
		t.Fatalf("create webhook: %d", st)
	}
	secret := admin.value("#secret-value")
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("secret = %q", secret)
	}
	admin.shot("webhooks")
	admin.submit(chromedp.Click(css("button[data-test-hook]")))
	servicetest.WaitFor(t, 30*time.Second, "the webhook.test delivery", func() bool { return len(sys.rcv.events("webhook.test")) == 1 })
	test := sys.rcv.events("webhook.test")[0]
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(test.body)
	if test.signature != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
		t.Fatalf("X-Service-Signature %q does not match the secret shown", test.signature)
	}
	// The delivery log shows it; Redeliver sends it again under the same delivery id.
	// The click navigates: wait for the hook's page to load before reading where it is,
	// or the log below would poll the list page it came from.
	if st := admin.submit(chromedp.Click(css("a[href^='/admin/webhooks/'].mono"))); st != http.StatusOK {
		t.Fatalf("open the webhook's page: %d", st)
	}
	hookPage := admin.location()
	if !strings.Contains(hookPage, "/admin/webhooks/") {
		t.Fatalf("after the click the tab is at %s, want the webhook's page", hookPage)
	}
	servicetest.WaitFor(t, 20*time.Second, "the delivery log", func() bool {
		admin.open(hookPage)
		return run(admin, chromedp.Evaluate[bool](`!!document.querySelector('#deliveries tr[data-event="webhook.test"][data-status="204"]')`))
	})
	admin.submit(chromedp.Click(css("#deliveries button")))
	servicetest.WaitFor(t, 30*time.Second, "the redelivery", func() bool { return len(sys.rcv.events("webhook.test")) == 2 })
	if again := sys.rcv.events("webhook.test")[1]; again.delivery != test.delivery {
		t.Fatalf("redelivery id %s, want %s", again.delivery, test.delivery)
	}
	servicetest.WaitFor(t, 20*time.Second, "the redelivery in the log", func() bool {
		admin.open(hookPage)
		return run(admin, chromedp.Evaluate[int](`document.querySelectorAll('#deliveries tr[data-status="204"]').length`)) == 2
	})
	admin.shot("webhook")

	// The other admin pages.
	admin.open("/admin/users")
	admin.shot("users")
	admin.open("/admin/audit")
	if audit := admin.text("#audit"); !strings.Contains(audit, "package.revoke") || !strings.Contains(audit, "recipient (link)") {
		t.Fatalf("audit log:\n%s", audit)
	}
	admin.shot("audit")
	admin.open("/")
	if rows := run(admin, chromedp.Evaluate[int](`document.querySelectorAll('#packages tbody tr').length`)); rows != 2 {
		t.Fatalf("dashboard rows = %d", rows)
	}
	admin.shot("dashboard")
	phone.open(sys.base + "/login")
	phone.do(chromedp.SendKeys(css("#email"), "admin@example.com"), chromedp.SendKeys(css("#password"), password))
	phone.submit(chromedp.Click(css("form button[type=submit]")))
	phone.do(chromedp.WaitVisible(css("#packages")))
	phone.shot("dashboard-phone")

	// The docs pages run under their own policy without violations (collected by
	// the tab).
	admin.open("/api/v1/docs")
	admin.do(chromedp.WaitVisible(css(".swagger-ui .info")))
	admin.open("/api/v1/redoc")
	admin.do(chromedp.WaitVisible(css(".api-content h1")))
}
