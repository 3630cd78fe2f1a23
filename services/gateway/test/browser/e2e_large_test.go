package browser

import (
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
	"strconv"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

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
