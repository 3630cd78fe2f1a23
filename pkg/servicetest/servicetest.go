// Package servicetest checks a service's lifecycle in tests: it starts the service's
// run function against the real dependencies, waits until /readyz answers 200, checks
// /healthz and /metrics, then cancels it as SIGTERM would and expects a clean return.
package servicetest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/service"
)

// FreeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Lifecycle runs fn (configured through the environment to listen on addr) and checks
// readiness, liveness, metrics and graceful shutdown.
func Lifecycle(t *testing.T, fn service.RunFunc, addr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() { done <- fn(ctx, log, nil) }()

	base := "http://" + addr
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("service stopped before it was ready: %v", err)
		default:
		}
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz still %d after 60s: %s", resp.StatusCode, body)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("/readyz unreachable after 60s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for path, want := range map[string]string{"/healthz": `"ok"`, "/metrics": "go_goroutines"} {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("%s: %d %.200s", path, resp.StatusCode, body)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("service did not stop within 30s of cancellation")
	}
	if _, err := client.Get(base + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}
}
