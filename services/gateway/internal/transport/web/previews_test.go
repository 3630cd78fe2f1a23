package web_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
	"github.com/shipfile/shipfile/services/gateway/internal/app/previews"
)

// testImage draws a w × h gradient.
func testImage(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), 128, 255})
		}
	}
	return img
}

func pngBytes(t *testing.T, img image.Image) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t *testing.T, img image.Image) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bombPNG is a valid PNG header declaring w × h RGB pixels, followed by a little
// compressed data: decoding it would need w × h × 4 bytes.
func bombPNG(t *testing.T, w, h uint32) []byte {
	chunk := func(out *bytes.Buffer, typ string, data []byte) {
		_ = binary.Write(out, binary.BigEndian, uint32(len(data)))
		crc := crc32.NewIEEE()
		crc.Write([]byte(typ))
		crc.Write(data)
		out.WriteString(typ)
		out.Write(data)
		_ = binary.Write(out, binary.BigEndian, crc.Sum32())
	}
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2 // 8 bits, RGB
	chunk(&out, "IHDR", ihdr)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write(make([]byte, 1<<20))
	_ = zw.Close()
	chunk(&out, "IDAT", z.Bytes())
	chunk(&out, "IEND", nil)
	return out.Bytes()
}

// previewFiles creates a package of owner's with a PNG, a JPEG, a text file and, when
// bomb, a decompression-bomb PNG, and returns the package and its files by name.
func (e *env) previewFiles(owner app.User, np packages.NewPackage, bomb bool) (app.Package, map[string]app.File) {
	e.t.Helper()
	ctx := context.Background()
	p, err := e.packages.Create(ctx, owner, app.Client{}, np)
	if err != nil {
		e.t.Fatal(err)
	}
	uploads := map[string][]byte{
		"photo.png": pngBytes(e.t, testImage(1600, 1200)),
		"photo.jpg": jpegBytes(e.t, testImage(800, 1400)),
		"notes.txt": []byte("not an image"),
	}
	if bomb {
		uploads["bomb.png"] = bombPNG(e.t, 50000, 50000)
	}
	files := map[string]app.File{}
	for name, b := range uploads {
		f, err := e.packages.UploadAsOwner(ctx, owner, app.Client{}, p.ID, app.Upload{Filename: name, ContentType: "application/octet-stream", Body: bytes.NewReader(b)})
		if err != nil {
			e.t.Fatal(err)
		}
		files[name] = f
	}
	return p, files
}

// objectExists reports whether key is in the test's bucket.
func (e *env) objectExists(key string) bool {
	e.t.Helper()
	_, err := e.objects.Client.StatObject(context.Background(), e.objects.Bucket, key, minio.StatObjectOptions{})
	if err == nil {
		return true
	}
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return false
	}
	e.t.Fatal(err)
	return false
}

// decodePreview checks that an answer is a JPEG preview that fits 1024 px.
func decodePreview(t *testing.T, p page) image.Config {
	t.Helper()
	expectStatus(t, p, http.StatusOK)
	if ct := p.header.Get("Content-Type"); ct != "image/jpeg" {
		t.Fatalf("Content-Type %q", ct)
	}
	cfg, format, err := image.DecodeConfig(strings.NewReader(p.body))
	if err != nil || format != "jpeg" || max(cfg.Width, cfg.Height) != previews.DefaultMaxSide {
		t.Fatalf("preview: %v %s %dx%d", err, format, cfg.Width, cfg.Height)
	}
	return cfg
}

// TestPreviewsThroughAProtectedLink: a PNG and a JPEG get previews (at once, with
// scanning off), served through a password-protected link only with its grant and to
// the owner, shown on both pages, never counted as downloads; a text file gets none;
// deleting the package removes the previews' objects.
func TestPreviewsThroughAProtectedLink(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("ann@example.com", app.RoleRegular)
	ctx := context.Background()
	pw := "correct horse battery"
	p, files := e.previewFiles(owner, packages.NewPackage{Title: ptr("Photos"), RecipientEmail: ptr("bob@example.com"), Password: &pw}, false)
	_, links, err := e.packages.Finalize(ctx, owner, app.Client{}, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	token := links[0].MagicLink[strings.LastIndex(links[0].MagicLink, "/")+1:]
	for name, f := range files {
		err := e.previews.Make(ctx, f.ID)
		switch {
		case name == "notes.txt" && !errors.Is(err, previews.ErrNotImage):
			t.Fatalf("%s: %v, want ErrNotImage", name, err)
		case name != "notes.txt" && err != nil:
			t.Fatalf("%s: %v", name, err)
		}
	}
	// A second delivery of the event makes nothing twice.
	if err := e.previews.Make(ctx, files["photo.png"].ID); err != nil {
		t.Fatal(err)
	}
	previewURL := func(name string) string {
		return "/api/v1/links/" + token + "/files/" + files[name].ID.String() + "/preview"
	}

	b := e.browser()
	t.Run("refused without the grant", func(t *testing.T) {
		expectStatus(t, b.get(previewURL("photo.png")), http.StatusUnauthorized)
		if page := b.get("/p/" + token); strings.Contains(page.body, "/preview") {
			t.Fatal("the locked page shows a preview")
		}
	})

	req, _ := http.NewRequest("POST", e.url+"/api/v1/links/"+token+"/unlock", strings.NewReader(`{"password":"`+pw+`"}`))
	req.Header.Set("Content-Type", "application/json")
	expectStatus(t, b.do(req), http.StatusOK)

	t.Run("served with the grant", func(t *testing.T) {
		png, jpg := decodePreview(t, b.get(previewURL("photo.png"))), decodePreview(t, b.get(previewURL("photo.jpg")))
		if png.Width != 1024 || png.Height != 768 || jpg.Width != 585 || jpg.Height != 1024 {
			t.Fatalf("preview sizes %dx%d and %dx%d", png.Width, png.Height, jpg.Width, jpg.Height)
		}
		expectStatus(t, b.get(previewURL("notes.txt")), http.StatusNotFound)
		page := b.get("/p/" + token)
		expectStatus(t, page, http.StatusOK)
		for name, want := range map[string]bool{"photo.png": true, "photo.jpg": true, "notes.txt": false} {
			if got := strings.Contains(page.body, `<img src="`+previewURL(name)+`"`); got != want {
				t.Fatalf("the recipient's page shows a thumbnail of %s: %v", name, got)
			}
		}
		var doc struct {
			Files []struct {
				Filename string `json:"filename"`
				Preview  bool   `json:"preview"`
			} `json:"files"`
		}
		if err := json.Unmarshal([]byte(b.get("/api/v1/links/"+token).body), &doc); err != nil || len(doc.Files) != 3 {
			t.Fatalf("link document: %v %+v", err, doc)
		}
		for _, f := range doc.Files {
			if f.Preview != (f.Filename != "notes.txt") {
				t.Fatalf("%s: preview %v", f.Filename, f.Preview)
			}
		}
	})

	t.Run("not a download", func(t *testing.T) {
		for range 3 {
			expectStatus(t, b.get(previewURL("photo.jpg")), http.StatusOK)
		}
		var count, budgets int
		if err := e.pool.QueryRow(ctx, `SELECT sum(download_count), (SELECT count(*) FROM link_budgets) FROM files WHERE package_id = $1`, p.ID).Scan(&count, &budgets); err != nil {
			t.Fatal(err)
		}
		if count != 0 || budgets != 0 {
			t.Fatalf("previews counted %d downloads, %d budget rows", count, budgets)
		}
		// A real download still counts: the query above can see one.
		expectStatus(t, b.get("/api/v1/links/"+token+"/files/"+files["photo.jpg"].ID.String()), http.StatusOK)
		if err := e.pool.QueryRow(ctx, `SELECT sum(download_count) FROM files WHERE package_id = $1`, p.ID).Scan(&count); err != nil || count != 1 {
			t.Fatalf("after one download: %d %v", count, err)
		}
	})

	owner2 := e.browser()
	owner2.login("ann@example.com")
	t.Run("the owner's page and preview", func(t *testing.T) {
		page := owner2.get("/packages/" + p.ID.String())
		n := len(regexp.MustCompile(`<img src="/api/v1/packages/[^"]+/preview"`).FindAllString(page.body, -1))
		if n != 2 {
			t.Fatalf("the owner's page shows %d thumbnails, want 2", n)
		}
		decodePreview(t, owner2.get("/api/v1/packages/"+p.ID.String()+"/files/"+files["photo.png"].ID.String()+"/preview"))
		// Another user gets nothing of it.
		_, other := e.signedIn("eve@example.com")
		expectStatus(t, other.get("/api/v1/packages/"+p.ID.String()+"/files/"+files["photo.png"].ID.String()+"/preview"), http.StatusForbidden)
	})

	t.Run("deleting the package removes the previews", func(t *testing.T) {
		keys := []string{previews.Key(files["photo.png"].ObjectKey), previews.Key(files["photo.jpg"].ObjectKey)}
		for _, k := range keys {
			if !e.objectExists(k) {
				t.Fatalf("no preview object %s", k)
			}
		}
		if err := e.packages.Delete(ctx, owner, app.Client{}, p.ID); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if e.objectExists(k) {
				t.Fatalf("preview object %s outlived its package", k)
			}
		}
		if n := e.count("object_deletions"); n != 0 {
			t.Fatalf("%d keys left queued", n)
		}
		expectStatus(t, b.get(previewURL("photo.png")), http.StatusGone)
	})
}

// TestPreviewGoesWithItsObject: every path that queues a file's object for deletion
// (an expiry, which keeps the row) queues its preview too, and removing a file
// removes its preview.
func TestPreviewGoesWithItsObject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("ann@example.com", app.RoleRegular)
	ctx := context.Background()
	p, files := e.previewFiles(owner, packages.NewPackage{Title: ptr("Draft"), RecipientEmail: ptr("bob@example.com")}, false)
	for _, name := range []string{"photo.png", "photo.jpg"} {
		if err := e.previews.Make(ctx, files[name].ID); err != nil {
			t.Fatal(err)
		}
	}
	// Removing a file of the draft removes its preview at once.
	png := previews.Key(files["photo.png"].ObjectKey)
	if !e.objectExists(png) {
		t.Fatal("no preview")
	}
	if err := e.packages.RemoveFile(ctx, owner, app.Client{}, p.ID, files["photo.png"].ID); err != nil {
		t.Fatal(err)
	}
	if e.objectExists(png) || e.count("object_deletions") != 0 {
		t.Fatalf("the removed file's preview is still there (or queued)")
	}
	// The expiry service queues the objects of an expired package's files (the rows
	// stay): the preview's key is queued with them, for its sweep.
	jpg := files["photo.jpg"]
	if _, err := e.pool.Exec(ctx, `INSERT INTO object_deletions (object_key) VALUES ($1)`, jpg.ObjectKey); err != nil {
		t.Fatal(err)
	}
	var queued []string
	rows, _ := e.pool.Query(ctx, `SELECT object_key FROM object_deletions ORDER BY object_key`)
	for rows.Next() {
		var k string
		_ = rows.Scan(&k)
		queued = append(queued, k)
	}
	if rows.Err() != nil || len(queued) != 2 || queued[0] != jpg.ObjectKey || queued[1] != previews.Key(jpg.ObjectKey) {
		t.Fatalf("queued %v, want the object and its preview", queued)
	}
}

// rssBytes is the process's resident set size (Linux).
func rssBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no VmRSS")
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n << 10
}

// TestPreviewOfABombCostsNothing: a PNG declaring 50,000 × 50,000 pixels (10 GB
// decoded) gets no preview, and making it allocates next to nothing: the header is
// read, nothing decoded. Not parallel, so the process's memory is this test's.
func TestPreviewOfABombCostsNothing(t *testing.T) {
	e := newEnv(t)
	owner := e.user("ann@example.com", app.RoleRegular)
	ctx := context.Background()
	_, files := e.previewFiles(owner, packages.NewPackage{Title: ptr("Bomb"), RecipientEmail: ptr("bob@example.com")}, true)
	bomb := files["bomb.png"]

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rss := rssBytes(t)
	err := e.previews.Make(ctx, bomb.ID)
	runtime.ReadMemStats(&after)
	grown := rssBytes(t) - rss
	if !errors.Is(err, previews.ErrTooLarge) {
		t.Fatalf("the bomb: %v, want ErrTooLarge", err)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("bomb: %d KiB allocated, RSS %+d KiB, heap in use %+d KiB", allocated>>10, grown>>10, (int64(after.HeapInuse)-int64(before.HeapInuse))>>10)
	if allocated > 8<<20 || grown > 32<<20 {
		t.Fatalf("refusing the bomb allocated %d bytes, RSS grew %d bytes", allocated, grown)
	}
	var key *string
	if err := e.pool.QueryRow(ctx, `SELECT preview_key FROM files WHERE id = $1`, bomb.ID).Scan(&key); err != nil || key != nil {
		t.Fatalf("the bomb's preview_key: %v %v", key, err)
	}
	if e.objectExists(previews.Key(bomb.ObjectKey)) {
		t.Fatal("the bomb has a preview object")
	}
	// The same maker still makes real previews afterwards.
	if err := e.previews.Make(ctx, files["photo.png"].ID); err != nil {
		t.Fatal(err)
	}
}
