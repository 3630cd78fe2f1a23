//go:build linux

package httpapi_test

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// TestResumeWithOneDownload: with max_downloads = 1, a download broken midway is
// resumed from the byte the client got to: the budget keeps what was written into the
// socket but never acknowledged by the client (megabytes of socket buffers), so the
// rest is not refused; and after it, nothing more.
func TestResumeWithOneDownload(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.MaxFileSize = 64 << 20
	a := newTestAPI(t, cfg)
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "Once", "recipient_email": "r@example.com", "max_downloads": 1})
	id := p["id"].(string)
	content := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	expect(t, a.upload("/api/v1/packages/"+id+"/files", token, "f.bin", content), http.StatusCreated)
	fin := a.do("POST", "/api/v1/packages/"+id+"/finalize", token, nil)
	expect(t, fin, http.StatusOK)
	link := linkToken(t, fin.json(t)["magic_link"])
	url := a.linkFiles(link)["f.bin"]["download_url"].(string)

	// The client reads 256 KiB, stops (its window closes, the gateway blocks with its
	// socket buffers full), then the connection breaks. What it holds: what it read
	// and what its kernel took in (and acknowledged) unread.
	conn, err := net.Dial("tcp", strings.TrimPrefix(a.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	tcp := conn.(*net.TCPConn)
	_ = tcp.SetReadBuffer(16 << 10)
	if _, err := conn.Write([]byte("GET " + url + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 16<<10)
	var body []byte
	for len(body) < 256<<10 {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
		if _, b, ok := bytes.Cut(got, []byte("\r\n\r\n")); ok {
			body = b
		}
	}
	time.Sleep(300 * time.Millisecond)
	raw, _ := tcp.SyscallConn()
	var unread int
	var ierr error
	if err := raw.Control(func(fd uintptr) { unread, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil || ierr != nil {
		t.Fatal(err, ierr)
	}
	_ = tcp.SetLinger(0)
	tcp.Close()
	received := len(body) + unread

	var rest response
	servicetest.WaitFor(t, 20*time.Second, "the rest of the file from byte "+strconv.Itoa(received), func() bool {
		rest = a.do("GET", url, "", nil, "Range", "bytes="+strconv.Itoa(received)+"-")
		return rest.status == http.StatusPartialContent
	})
	if !bytes.Equal(rest.body, content[received:]) || !bytes.Equal(body, content[:len(body)]) {
		t.Fatalf("the resumed download (%d + %d unread + %d bytes) is not the file", len(body), unread, len(rest.body))
	}
	expect(t, a.do("GET", url, "", nil, "Range", "bytes=-1"), http.StatusGone)
	expect(t, a.do("GET", "/api/v1/links/"+link, "", nil), http.StatusGone)
}
