package httpapi_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/httpapi"
)

// countingListener counts the bytes the server reads from every connection it accepts.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, read: &l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// TestBodyGuardReadsAfterRouting: a request whose route is unknown, whose credential is
// refused or whose link is dead is answered at once, with a body of 8 MiB announced
// and only its first 32 KiB sent, without the server reading the body (it reads the
// request's head and no more than one buffer of the connection) and with the
// connection closed after the answer, so that nothing of the body is read for it
// either. The same body to a route that takes it, once authenticated, is still parsed.
func TestBodyGuardReadsAfterRouting(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Bodies = httpapi.BodyLimits{Timeout: 20 * time.Second, MinRate: 1, RateWindow: 20 * time.Second}
	a := newTestAPI(t, cfg)
	_, token := a.user("guard@example.com", app.RoleRegular)

	srv := httptest.NewUnstartedServer(a.engine)
	counted := &countingListener{Listener: srv.Listener}
	srv.Listener = counted
	srv.Start()
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")

	const announced, sent = 8 << 20, 32 << 10
	for name, c := range map[string]struct {
		method, path, auth string
		chunked            bool
		want               int
	}{
		"unknown API route":             {"POST", "/api/v1/nothing-here", "", false, http.StatusNotFound},
		"unknown API route, chunked":    {"POST", "/api/v1/nothing-here", "", true, http.StatusNotFound},
		"unknown page":                  {"POST", "/nothing-here", "", true, http.StatusNotFound},
		"unrouted method":               {"PUT", "/api/v1/packages", "Bearer " + token, true, http.StatusMethodNotAllowed},
		"no credential":                 {"POST", "/api/v1/packages", "", false, http.StatusUnauthorized},
		"no credential, chunked":        {"POST", "/api/v1/packages", "", true, http.StatusUnauthorized},
		"an unknown token":              {"POST", "/api/v1/me/tokens", "Bearer sf_" + strings.Repeat("x", 40), true, http.StatusUnauthorized},
		"a dead link's unlock":          {"POST", "/api/v1/links/" + strings.Repeat("A", 43) + "/unlock", "", true, http.StatusGone},
		"an admin route, no credential": {"POST", "/api/v1/admin/users", "", true, http.StatusUnauthorized},
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			before := counted.read.Load()
			head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n", c.method, c.path, addr)
			if c.auth != "" {
				head += "Authorization: " + c.auth + "\r\n"
			}
			body := strings.Repeat("x", sent)
			if c.chunked {
				head += "Transfer-Encoding: chunked\r\n\r\n"
				body = fmt.Sprintf("%x\r\n%s\r\n", sent, body) // a first chunk, and never the last
			} else {
				head += fmt.Sprintf("Content-Length: %d\r\n\r\n", announced)
			}
			start := time.Now()
			if _, err := io.WriteString(conn, head+body); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer within 10 s (the body's time limit is 20 s): %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("status = %d, want %d", resp.StatusCode, c.want)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("answered after %s, want at once", took)
			}
			if !resp.Close {
				t.Errorf("the answer keeps the connection, so the server reads the rest of the body first")
			}
			// The server closes the connection without reading on.
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("the connection stayed open after the answer")
				}
			}
			if n := counted.read.Load() - before; n >= 16<<10 {
				t.Fatalf("the server read %d bytes of the connection, want the request's head and at most a buffer (< 16 KiB) of the %d sent", n, len(head)+len(body))
			}
		})
	}

	// Once authenticated, a body is read and parsed as ever.
	r := a.do("POST", "/api/v1/packages", token, map[string]any{"title": "parsed", "recipient_email": "r@example.com"})
	expect(t, r, http.StatusCreated)
	if got := r.json(t)["title"]; got != "parsed" {
		t.Fatalf("title = %v, want the one sent", got)
	}
}
