package browser

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
)

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
