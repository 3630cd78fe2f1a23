package browser

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/minio/minio-go/v7"
)

// TestEndToEndPreviews: the images of an end-to-end encrypted package get thumbnails
// drawn in the browser from the decrypted bytes, and the server makes none. The
// owner's page (which counts nothing) draws them at once; the recipient's page, where
// every fetch through the link counts a download, offers them on a click and, under a
// download limit, says why it offers none. A PNG declaring 50,000 × 50,000 pixels gets
// no preview: its header is refused before anything is decoded.
func TestEndToEndPreviews(t *testing.T) {
	sys, bctx, sender, api := outSession(t, 6*time.Minute)

	beach, portrait, bomb := previewImages(t)
	files := []*sentFile{
		{name: "beach.png", data: beach},
		{name: "portrait.jpg", data: portrait},
		{name: "bomb.png", data: bomb},
		{name: "notes.txt", data: []byte("not an image\n")},
	}
	pkgID, link, _, _ := sendEncrypted(t, sys, sender, api, "Holiday photos", "", files)
	byName := map[string]*sentFile{}
	for _, f := range files {
		byName[f.name] = f
	}
	// The owner's page draws them at once (the key is in this browser).
	sender.open("/packages/" + pkgID)
	sender.waitJS("the owner's previews", `document.querySelectorAll('[data-e2e-owner] tr[data-preview=shown]').length === 2 && document.querySelector('[data-e2e-owner] tr[data-preview=none]')`)
	rowOf := func(scope string) func(string) string {
		return func(name string) string { return scope + `[data-file-id="` + byName[name].id + `"]` }
	}
	checkPreviews(t, sender, rowOf("[data-e2e-owner] tr"), "bomb.png", "notes.txt")

	// The recipient's page offers them: nothing is fetched before the click.
	bob := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	bob.openEncrypted(link, "")
	bob.waitJS("the previews offered", `document.querySelector('#e2e-previews[data-previews=offered] #e2e-show-previews')`)
	if n := run(bob, chromedp.Evaluate[int](`document.querySelectorAll('#files canvas').length`)); n != 0 {
		t.Fatalf("%d previews before the click", n)
	}
	counts := func() map[string]float64 {
		t.Helper()
		pkg := api.Must("GET", "/api/v1/packages/"+pkgID, nil, http.StatusOK)
		out := map[string]float64{}
		for _, f := range pkg["files"].([]any) {
			m := f.(map[string]any)
			if m["preview"] != false {
				t.Fatalf("file %v of an encrypted package: preview = %v", m["id"], m["preview"])
			}
			out[m["id"].(string)], _ = m["download_count"].(float64)
		}
		return out
	}
	for id, n := range counts() {
		if n != 0 {
			t.Fatalf("file %s counted %v downloads before any preview", id, n)
		}
	}
	bob.docsShot("e2e-previews-offer")
	bob.do(chromedp.Click(css("#e2e-show-previews")))
	bob.waitJS("the recipient's previews", `document.querySelector('#e2e-previews[data-previews=done]')`)
	checkPreviews(t, bob, rowOf("#files li"), "bomb.png", "notes.txt")
	bob.docsShot("e2e-previews")

	// Each image fetched for a preview is a download the server counted (the bomb too:
	// its header had to be read); the text file was never fetched.
	c := counts()
	for _, name := range []string{"beach.png", "portrait.jpg", "bomb.png"} {
		if c[byName[name].id] != 1 {
			t.Fatalf("%s: download_count %v after its preview, want 1", name, c[byName[name].id])
		}
	}
	if c[byName["notes.txt"].id] != 0 {
		t.Fatalf("notes.txt: download_count %v, want 0", c[byName["notes.txt"].id])
	}

	// Under a download limit the page offers no previews and says why.
	api.Must("PATCH", "/api/v1/packages/"+pkgID, map[string]any{"max_downloads": 5}, http.StatusOK)
	bob.do(chromedp.Navigate("about:blank"))
	bob.openEncrypted(link, "")
	bob.waitJS("the limit's note", `document.querySelector('#e2e-previews[data-previews=limited]')`)
	if note := bob.text("#e2e-previews"); !strings.Contains(note, "download limit") {
		t.Fatalf("the note under a limit: %q", note)
	}
	if n := run(bob, chromedp.Evaluate[int](`document.querySelectorAll('#files canvas, #e2e-show-previews').length`)); n != 0 {
		t.Fatalf("under a limit the page shows %d previews or buttons", n)
	}

	// The server stored no preview object for any of the files.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for obj := range sys.store.Client.ListObjects(ctx, sys.store.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if strings.Contains(obj.Key, ".preview") {
			t.Fatalf("the server stored a preview of an encrypted file: %s", obj.Key)
		}
	}
}

// TestEndToEndInboundPreviews: on the owner's page of an encrypted request, once the
// passphrase opened the key, the images the recipient uploaded get thumbnails drawn
// from the decrypted bytes (the bomb none); Lock takes them away.
func TestEndToEndInboundPreviews(t *testing.T) {
	sys := startOutSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
	owner.createE2EKey(passphrase)
	link, pkgID := owner.encryptedRequest("rita@example.com", "Scans")

	beach, portrait, bomb := previewImages(t)
	dir := t.TempDir()
	var paths []string
	for name, b := range map[string][]byte{"beach.png": beach, "portrait.jpg": portrait, "bomb.png": bomb, "notes.txt": []byte("not an image\n")} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	rita := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	if st := rita.open(link); st != http.StatusOK {
		t.Fatalf("the request page: %d", st)
	}
	rita.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`),
		setFiles("#files-input", paths))
	rita.waitJS("the encrypted uploads", `document.querySelectorAll('.uploads li[data-state=done][data-encrypted]').length === 4`)

	owner.open("/packages/" + pkgID)
	owner.do(chromedp.WaitVisible(css("#e2e-unlock")))
	owner.do(chromedp.SendKeys(css("#e2e-unlock-pass"), passphrase), chromedp.Click(css("#e2e-unlock-button")))
	owner.waitJS("the owner's previews", `document.querySelectorAll('#e2e-files tr[data-preview=shown]').length === 2 && document.querySelector('#e2e-files tr[data-preview=none]')`)
	checkPreviews(t, owner, func(name string) string { return `#e2e-files tr[data-name="` + name + `"]` }, "bomb.png", "notes.txt")
	owner.shot("e2e-inbound-previews")

	owner.do(chromedp.Click(css("#e2e-lock")))
	if n := run(owner, chromedp.Evaluate[int](`document.querySelectorAll('#e2e-files canvas, #e2e-files tr[data-preview]').length`)); n != 0 {
		t.Fatalf("%d previews left after Lock", n)
	}
}

// previewWant is what the thumbnails of the test's images are checked against: their
// natural sizes and the colour halfway down each gradient, where the thumbnail's
// centre is.
var previewWant = map[string]struct{ w, h, r, g, b int }{
	"beach.png":    {640, 400, 225, 70, 65},
	"portrait.jpg": {300, 500, 30, 120, 195},
}

// previewImages are the test's images: a PNG and a JPEG (gradients, previewWant), and a
// PNG declaring 50,000 × 50,000 pixels.
func previewImages(t *testing.T) (beach, portrait, bomb []byte) {
	t.Helper()
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, gradient(300, 500, color.NRGBA{40, 200, 230, 255}, color.NRGBA{20, 40, 160, 255}), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return encodePNG(t, gradient(640, 400, color.NRGBA{250, 120, 40, 255}, color.NRGBA{200, 20, 90, 255})), jb.Bytes(), bombPNG(t, 50000, 50000)
}

// checkPreviews checks the thumbnails in the rows rowOf(name) selects: the images' natural
// sizes and colours as the browser decoded them (previewWant); the bomb's row has
// none, refused as too large, and the rows of none (not images) were never tried.
func checkPreviews(t *testing.T, tb *tab, rowOf func(string) string, bomb string, none ...string) {
	t.Helper()
	for name, want := range previewWant {
		sel := rowOf(name)
		got := run(tb, chromedp.Evaluate[[]int](`(() => {
			const c = document.querySelector(`+jsString(sel+" canvas.e2e-preview")+`);
			if (!c) return [];
			const p = c.getContext('2d').getImageData(c.width >> 1, c.height >> 1, 1, 1).data;
			return [+c.dataset.naturalWidth, +c.dataset.naturalHeight, c.width, c.height, p[0], p[1], p[2]];
		})()`))
		if len(got) != 7 {
			t.Fatalf("%s: no preview (%s)", name, run(tb, chromedp.Evaluate[string](`(document.querySelector(`+jsString(sel)+`) || {}).outerHTML || ''`)))
		}
		if got[0] != want.w || got[1] != want.h {
			t.Fatalf("%s: natural size %d × %d, want %d × %d", name, got[0], got[1], want.w, want.h)
		}
		// The thumbnail keeps the image's proportions within 160 px.
		if max(got[2], got[3]) != 160 || abs(got[2]*want.h-got[3]*want.w) > max(want.w, want.h) {
			t.Fatalf("%s: thumbnail %d × %d for %d × %d", name, got[2], got[3], want.w, want.h)
		}
		for i, c := range []int{want.r, want.g, want.b} {
			if abs(got[4+i]-c) > 24 {
				t.Fatalf("%s: the thumbnail's centre is %v, want about %d %d %d", name, got[4:], want.r, want.g, want.b)
			}
		}
	}
	state := func(name string) string {
		return run(tb, chromedp.Evaluate[string](`(() => { const r = document.querySelector(`+jsString(rowOf(name))+`); return r.querySelector('canvas') ? 'canvas' : (r.dataset.preview || '') + '/' + (r.dataset.previewWhy || '') })()`))
	}
	if st := state(bomb); st != "none/too-large" {
		t.Fatalf("the bomb's preview: %q, want none/too-large", st)
	}
	for _, name := range none {
		if st := state(name); st != "/" {
			t.Fatalf("%s: preview %q, want none tried", name, st)
		}
	}
}

// gradient is a w × h image going from top to bottom from one colour to the other.
func gradient(w, h int, top, bottom color.NRGBA) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	mix := func(a, b uint8, y int) uint8 { return uint8((int(a)*(h-1-y) + int(b)*y) / (h - 1)) }
	for y := range h {
		c := color.NRGBA{mix(top.R, bottom.R, y), mix(top.G, bottom.G, y), mix(top.B, bottom.B, y), 255}
		for x := range w {
			img.Set(x, y, c)
		}
	}
	return img
}

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bombPNG is a small valid-looking PNG whose header declares w × h pixels (8-bit
// grey), with one short compressed row: a decoder that trusted it would allocate w × h
// bytes before finding the data short.
func bombPNG(t *testing.T, w, h uint32) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 0 // bit depth 8, greyscale
	chunk("IHDR", ihdr)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	if _, err := zw.Write(make([]byte, 1+int(w))); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return b.Bytes()
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
