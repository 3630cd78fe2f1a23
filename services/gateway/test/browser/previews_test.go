package browser

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestPreviewsInBrowser: an image sent through the web UI shows a thumbnail, made by
// the gateway's preview consumer, on the recipient's page (with the sender named)
// and on the owner's page; the thumbnail loads, and opens the larger view.
func TestPreviewsInBrowser(t *testing.T) {
	sys := startSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bctx := newBrowser(t, ctx)
	owner := newTab(t, bctx, sys.base)
	const password = "a long admin password"
	owner.setup("ada@example.com", "Ada Admin", password)
	owner.inboundSignIn("ada@example.com", password)

	img := image.NewNRGBA(image.Rect(0, 0, 1600, 1000))
	for y := range 1000 {
		for x := range 1600 {
			img.Set(x, y, color.NRGBA{uint8(x / 7), uint8(y / 4), 200, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "photo.png")
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	owner.open("/send")
	owner.do(chromedp.SendKeys(css("#recipient_email"), "bob@example.com"), chromedp.SendKeys(css("#title"), "Photo"))
	owner.submit(chromedp.Click(css("#package-form button[type=submit]")))
	pkgURL := owner.location()
	owner.waitJS("the draft's page", `document.readyState === 'complete' && document.querySelector('#files')`)
	owner.do(setFiles("#files", []string{file}))
	owner.waitJS("the upload", `!!document.querySelector('#files-table') && document.querySelector('#files-table').textContent.includes('photo.png')`)
	if st := owner.submit(chromedp.Click(css("#finalize"))); st != http.StatusOK {
		t.Fatalf("finalize: %d", st)
	}
	link := owner.value("#magic-link")

	bob := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	// The preview is made after the upload event: the page shows it once it is there.
	var loaded bool
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline) && !loaded; {
		if st := bob.open(link); st != http.StatusOK {
			t.Fatalf("the link's page: %d", st)
		}
		loaded = run(bob, chromedp.Evaluate[bool](`!!document.querySelector('#files a.preview img')`))
		if !loaded {
			time.Sleep(500 * time.Millisecond)
		}
	}
	if !loaded {
		t.Fatal("no thumbnail on the recipient's page within 45 s")
	}
	bob.waitJS("the thumbnail's image", `(() => { const i = document.querySelector('#files a.preview img'); return i.complete && i.naturalWidth === 1024 && i.naturalHeight === 640 })()`)
	if sender := bob.text("#sender"); !strings.Contains(sender, "Ada Admin") || !strings.Contains(sender, "ada@example.com") {
		t.Fatalf("the sender line: %q", sender)
	}
	bob.shot("recipient-preview")
	big := run(bob, chromedp.Evaluate[string](`document.querySelector('#files a.preview').getAttribute('href')`))
	if st := run(bob, chromedp.Evaluate[int](`fetch(`+jsString(big)+`).then(r => r.arrayBuffer().then(() => r.status))`, chromedp.EvalAwaitPromise)); st != http.StatusOK {
		t.Fatalf("the larger view: %d", st)
	}

	owner.open(strings.TrimPrefix(pkgURL, sys.base))
	owner.waitJS("the owner's thumbnail", `(() => { const i = document.querySelector('#files-table a.preview img'); return i && i.complete && i.naturalWidth === 1024 })()`)
	// Previews are no downloads.
	if d := owner.text("#files-table td.downloads"); !strings.HasPrefix(strings.TrimSpace(d), "0") {
		t.Fatalf("downloads after previews: %q", d)
	}
	owner.shot("owner-preview")
}
