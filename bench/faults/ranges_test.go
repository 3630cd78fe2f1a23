//go:build faults

package faults

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shipfile/shipfile/bench/internal/rig"
)

// TestHostileRangeGames: a recipient who tries every trick against a link with
// max_downloads = 1, 2 and 5 (docs/API.md, "Download limit"): HEADs, downloads cut midway and
// resumed with Range, halves, suffix ranges past the size, bytes=00-, multi-ranges, a
// stale If-Range, archives read whole and archives cut after their first entry, eight
// parallel downloads, then plain GETs until 410. Each file's bytes that reached the
// client, over its size, are the whole copies obtained: never more than N.
func TestHostileRangeGames(t *testing.T) {
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	s.StartGateway("SHIPFILE_LINK_RATE=10000", "SHIPFILE_LINK_BURST=10000")
	names := []string{"a.bin", "b.bin"}
	sizes := map[string]int64{"a.bin": 4 << 20, "b.bin": 300 << 10}
	for _, n := range []int{1, 2, 5} {
		body := rig.PackageBody(fmt.Sprintf("range games, max_downloads %d", n))
		body.MaxDownloads = &n
		id := s.API.MustCreatePackage(t, body).Id.String()
		for i, name := range names {
			if a, err := s.API.Upload(context.Background(), id, name, rig.Payload(sizes[name], uint64(i+1))); err != nil || a.Status != http.StatusCreated {
				t.Fatalf("upload %s: %v %v", name, a, err)
			}
		}
		g := &gamer{t: t, base: s.API.Base, token: rig.LinkToken(s.API.MustFinalize(t, id).MagicLink), sizes: sizes, got: map[string]int64{}}
		g.urls = g.fileURLs()
		g.play(names)
		var copies []string
		for _, name := range names {
			c := float64(g.got[name]) / float64(sizes[name])
			copies = append(copies, fmt.Sprintf("%s %.2f", name, c))
			if g.got[name] > int64(n)*sizes[name] {
				t.Errorf("max_downloads %d: %s: %d bytes obtained, %.2f copies", n, name, g.got[name], c)
			}
		}
		record(t, fmt.Sprintf("max_downloads %d: whole copies obtained", n), strings.Join(copies, ", "))
		record(t, fmt.Sprintf("max_downloads %d: answers to %d requests", n, g.requests), g.answers.String())
		if g.answers.count(http.StatusInternalServerError) > 0 {
			t.Errorf("max_downloads %d: a 500 among %s", n, g.answers.String())
		}
	}
}

// gamer is the hostile recipient: got counts each file's bytes that reached it.
type gamer struct {
	t        *testing.T
	base     string
	token    string
	urls     map[string]string
	sizes    map[string]int64
	mu       sync.Mutex
	got      map[string]int64
	answers  statuses
	requests int
}

func (g *gamer) fileURLs() map[string]string {
	a, err := rig.NewClient(g.base, "").Do(context.Background(), "GET", "/api/v1/links/"+g.token, nil)
	if err != nil || a.Status != http.StatusOK {
		g.t.Fatalf("link view: %v %v", a, err)
	}
	out := map[string]string{}
	for _, f := range a.JSON["files"].([]any) {
		m := f.(map[string]any)
		out[m["filename"].(string)] = m["download_url"].(string)
	}
	return out
}

// archived returns the files a link's archive holds now: those whose budget holds a
// whole copy (downloads_left null or at least 1), in the link view's order.
func (g *gamer) archived() []string {
	a, err := rig.NewClient(g.base, "").Do(context.Background(), "GET", "/api/v1/links/"+g.token, nil)
	if err != nil || a.Status != http.StatusOK {
		return nil // the whole link answers 410: no archive either
	}
	var out []string
	for _, f := range a.JSON["files"].([]any) {
		m := f.(map[string]any)
		if left, ok := m["downloads_left"].(float64); !ok || left >= 1 {
			out = append(out, m["filename"].(string))
		}
	}
	return out
}

// add counts an answer and the bytes of the file name it brought.
func (g *gamer) add(name string, n int64, status int) {
	g.addBytes(name, n)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.requests++
	g.answers.add(status)
}

// addBytes counts bytes of the file name that reached the client.
func (g *gamer) addBytes(name string, n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.got[name] += n
}

var gameClient = &http.Client{Timeout: time.Minute}

// get sends one request with headers and counts the body it got of the file name.
func (g *gamer) get(method, name string, headers ...string) int {
	req, _ := http.NewRequest(method, g.base+g.urls[name], nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := gameClient.Do(req)
	if err != nil {
		g.add(name, 0, -1)
		return -1
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		n = 0
	}
	g.add(name, n, resp.StatusCode)
	return resp.StatusCode
}

// cut reads path through a connection with a small receive buffer until at least
// after bytes of the body arrived, stops reading (the gateway blocks on a closed
// window), then resets the connection, as a broken network would. It returns the body
// bytes that reached the client: those it read and those its kernel took in unread
// (0 and the status when the answer is not a 200).
func (g *gamer) cut(path string, after int64) (int64, int) {
	u, _ := url.Parse(g.base)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		g.t.Fatal(err)
	}
	tcp := conn.(*net.TCPConn)
	_ = tcp.SetReadBuffer(16 << 10)
	defer func() {
		_ = tcp.SetLinger(0)
		tcp.Close()
	}()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	if _, err := conn.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		return 0, -1
	}
	var got []byte
	buf := make([]byte, 16<<10)
	for {
		k, err := conn.Read(buf)
		got = append(got, buf[:k]...)
		head, body, ok := bytes.Cut(got, []byte("\r\n\r\n"))
		if ok && !bytes.HasPrefix(head, []byte("HTTP/1.1 200")) {
			status, _ := strconv.Atoi(string(bytes.Fields(head)[1]))
			return 0, status
		}
		if err != nil {
			return int64(len(body)), http.StatusOK
		}
		if ok && int64(len(body)) >= after {
			time.Sleep(200 * time.Millisecond)
			return int64(len(body)) + unread(tcp), http.StatusOK
		}
	}
}

// unread is how many bytes c's kernel holds that were not read (SIOCINQ).
func unread(c *net.TCPConn) int64 {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	var n int
	var ierr error
	err = raw.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	if err != nil || ierr != nil {
		panic(fmt.Sprint(err, ierr))
	}
	return int64(n)
}

// archive reads the whole zip and counts each entry's bytes.
func (g *gamer) archive() {
	resp, err := gameClient.Get(g.base + "/api/v1/links/" + g.token + "/archive")
	if err != nil {
		g.add("", 0, -1)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	g.add("", 0, resp.StatusCode)
	if resp.StatusCode != http.StatusOK {
		return
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		g.t.Errorf("archive: %v", err)
		return
	}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			g.t.Errorf("archive entry %s: %v", f.Name, err)
			continue
		}
		n, _ := io.Copy(io.Discard, rc)
		rc.Close()
		g.addBytes(f.Name, n)
	}
}

// play runs every trick against the files, in order from the thriftiest.
func (g *gamer) play(names []string) {
	for _, name := range names {
		for range 3 {
			g.get("HEAD", name)
			g.get("HEAD", name, "Range", "bytes=-999999999")
		}
		// Cut after a third, then resume from what arrived.
		n, st := g.cut(g.urls[name], g.sizes[name]/3)
		g.add(name, n, st)
		// The gateway gives back what the cut answer did not deliver once it sees the
		// connection broken: until then the resume may be refused, so it is retried.
		for i := 0; st == http.StatusOK && i < 20; i++ {
			if g.get("GET", name, "Range", "bytes="+strconv.FormatInt(n, 10)+"-") != http.StatusGone {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		// Halves.
		half := g.sizes[name] / 2
		g.get("GET", name, "Range", "bytes=0-"+strconv.FormatInt(half-1, 10))
		g.get("GET", name, "Range", "bytes="+strconv.FormatInt(half, 10)+"-")
	}
	// Archives: one read whole, one cut after its first entry, twice each.
	for range 2 {
		g.archive()
		// The archive holds the files whose budget holds a whole copy, in the link view's
		// order: the bytes of a cut one are attributed to them in that order, each up to
		// its size (an upper bound: an entry's headers count as its bytes).
		in := g.archived()
		n, st := g.cut("/api/v1/links/"+g.token+"/archive", g.sizes[names[0]]+64<<10)
		g.add("", 0, st)
		for _, name := range in {
			k := min(n, g.sizes[name])
			g.addBytes(name, k)
			n -= k
		}
	}
	// Eight parallel downloads of each file.
	var wg sync.WaitGroup
	for _, name := range names {
		for range 8 {
			wg.Go(func() { g.get("GET", name) })
		}
	}
	wg.Wait()
	// The header games, then plain GETs until the file answers 410.
	for _, name := range names {
		for range 3 {
			g.get("GET", name, "Range", "bytes=-999999999")
			g.get("GET", name, "Range", "bytes=00-")
			g.get("GET", name, "Range", "bytes=1-,0-")
			g.get("GET", name, "Range", "bytes=0-0,-1")
			g.get("GET", name, "Range", "bytes=1-", "If-Range", `"stale"`)
			g.get("GET", name, "Range", "bytes=-0")
		}
		for range 12 {
			if g.get("GET", name) == http.StatusGone {
				break
			}
		}
	}
}
