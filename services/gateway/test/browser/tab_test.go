package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

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

func css(s string) chromedp.CSS { return chromedp.CSS(s) }

// setFiles sets the files of the file input that the CSS selector sel finds, waiting
// for it to appear. It hands the browser the element's JavaScript object, not a DOM
// node id: chromedp's node ids come from its own copy of the DOM, which it refetches
// in the background after a page loads, and a refetch invalidates every id it handed
// out before ("No node with given id found"). An object id stays valid as long as the
// page that made it.
func setFiles(sel string, paths []string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		find := chromedp.Evaluate[*runtime.RemoteObject](fmt.Sprintf("document.querySelector(%q)", sel))
		for {
			obj, err := find(ctx, t)
			if err != nil {
				return chromedp.Void{}, fmt.Errorf("find %s: %w", sel, err)
			}
			if obj.ObjectID != "" {
				_, err = cdp.Call(ctx, t, dom.SetFileInputFiles, dom.SetFileInputFilesParams{Files: paths, ObjectID: runtime.RemoteObjectID(obj.ObjectID)})
				return chromedp.Void{}, err
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, fmt.Errorf("find %s: %w", sel, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}
