package ops_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/ops"
)

// serve runs ServeListener on a loopback port with opts until the test ends.
func serve(t *testing.T, opts ...ops.Option) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ops.ServeListener(ctx, slog.New(slog.DiscardHandler), ln, http.HandlerFunc(ops.Healthz), time.Second, opts...)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Addr().String()
}

// closedWithin reports whether the server closes conn within d (a read returns EOF
// or a reset rather than timing out).
func closedWithin(conn net.Conn, r *bufio.Reader, d time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	_, err := r.ReadByte()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

// TestIdleTimeout: a keep-alive connection that carries no request for the idle
// timeout is closed by the server.
func TestIdleTimeout(t *testing.T) {
	addr := serve(t, ops.WithIdleTimeout(200*time.Millisecond))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !closedWithin(conn, r, 3*time.Second) {
		t.Fatal("an idle keep-alive connection was still open 3 s after a 200 ms idle timeout")
	}
}
