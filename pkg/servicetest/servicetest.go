// Package servicetest helps tests that run services: Lifecycle starts a service's run
// function against the real dependencies, waits until /readyz answers 200, checks
// /healthz and /metrics, then cancels it as SIGTERM would and expects a clean return;
// StartNATS runs a private nats-server process for tests that freeze or kill it.
// End-to-end suites build the real binaries once in TestMain (RunWithBinaries), run
// them (StartProcess, WaitReady) and call the gateway's API (Client).
package servicetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shipfile/shipfile/pkg/service"
)

// FreeAddr returns a 127.0.0.1 address with a port that was free a moment ago, and
// never one it returned before in this process: the kernel may hand a port just
// released to the next listener on :0, so two calls in a row (a service's HTTP and ops
// addresses) could otherwise get the same port, and the service could not bind both.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		freeAddrs.Lock()
		seen := freeAddrs.given[addr]
		freeAddrs.given[addr] = true
		freeAddrs.Unlock()
		if !seen {
			return addr
		}
	}
}

// freeAddrs are the addresses FreeAddr has returned in this process.
var freeAddrs = struct {
	sync.Mutex
	given map[string]bool
}{given: map[string]bool{}}

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

// WaitFor polls cond until it holds, failing the test when within passes first.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// NATSServerBin finds a nats-server binary of version MinNATSVersion or later:
// SHIPFILE_NATS_SERVER_BIN, the project's cache (scripts/dev.sh installs the pinned one
// there), PATH, or Debian's.
func NATSServerBin(t testing.TB) string {
	t.Helper()
	candidates := []string{os.Getenv("SHIPFILE_NATS_SERVER_BIN")}
	if dir, err := os.UserCacheDir(); err == nil {
		candidates = append(candidates, filepath.Join(dir, "shipfile", "bin", "nats-server"))
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		candidates = append(candidates, p)
	}
	var old []string
	for _, c := range append(candidates, "/usr/sbin/nats-server") {
		if fi, err := os.Stat(c); c == "" || err != nil || fi.IsDir() {
			continue
		}
		if v, ok := natsVersionAtLeast(c, MinNATSVersion); !ok {
			old = append(old, c+" "+v)
			continue
		}
		return c
	}
	t.Fatalf("no nats-server binary of version %d.%d or later (found: %v): run make test (it installs one) or set SHIPFILE_NATS_SERVER_BIN",
		MinNATSVersion[0], MinNATSVersion[1], old)
	return ""
}

// MinNATSVersion is the oldest NATS server shipfile runs on: 2.10, the first whose
// consumers take several filter subjects (a webhook subscription's consumer does).
var MinNATSVersion = [2]int{2, 10}

// natsVersions caches what each nats-server binary printed for --version: a test
// process asks once per binary, not once per server it starts.
var natsVersions sync.Map // path → string ("" when it printed nothing)

// natsVersionAtLeast reports the version bin prints and whether it is min or later.
func natsVersionAtLeast(bin string, min [2]int) (string, bool) {
	cached, ok := natsVersions.Load(bin)
	if !ok {
		out, err := exec.Command(bin, "--version").Output()
		if err != nil {
			out = nil
		}
		cached, _ = natsVersions.LoadOrStore(bin, strings.TrimSpace(string(out)))
	}
	v := cached.(string)
	if v == "" {
		return "(no version)", false
	}
	var major, minor int
	if _, err := fmt.Sscanf(v[strings.LastIndex(v, "v")+1:], "%d.%d", &major, &minor); err != nil {
		return v, false
	}
	return v, major > min[0] || (major == min[0] && minor >= min[1])
}

// StartNATS runs a private JetStream server on 127.0.0.1 for the test (which may freeze
// or kill it) and returns the process and its URL once it answers as that server.
//
// The port comes from FreeAddr, which releases it before the server binds it, so another
// process may take it first. Then the new server exits, and whatever holds the port (a
// server of another test, which may be frozen or killed at any time) must not pass for
// it: the server is given a name of its own, and only a connection that reports that name
// counts. A server that exits before it answers is started again on another port.
func StartNATS(t testing.TB) (*exec.Cmd, string) {
	t.Helper()
	const tries = 3
	var why string
	for range tries {
		cmd, url, err := startNATS(t)
		if err == nil {
			return cmd, url
		}
		why = err.Error()
	}
	t.Fatalf("nats-server did not start in %d tries: %s", tries, why)
	return nil, ""
}

// startNATS starts one private server and waits until it answers under its own name; it
// returns an error when the process exits first (its port taken).
func startNATS(t testing.TB) (*exec.Cmd, string, error) {
	t.Helper()
	host, port, _ := net.SplitHostPort(FreeAddr(t))
	name := "shipfile-test-" + strings.ToLower(rand.Text()[:10])
	logPath := filepath.Join(t.TempDir(), "nats.log")
	cmd := exec.Command(NATSServerBin(t), "-a", host, "-p", port, "-js", "-sd", t.TempDir(),
		"--server_name", name, "-l", logPath)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // in case the test froze it
		_ = cmd.Process.Kill()
		<-exited
	})
	url := "nats://" + net.JoinHostPort(host, port)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return nil, "", fmt.Errorf("nats-server on %s exited: %s", url, tail(logPath, 5))
		default:
		}
		if answersAs(url, name) {
			return cmd, url, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nats-server on %s did not answer as %s within 20s: %s", url, name, tail(logPath, 5))
	return nil, "", nil
}

// answersAs reports whether the server at url is the one named name.
func answersAs(url, name string) bool {
	nc, err := nats.Connect(url, nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return false
	}
	defer nc.Close()
	return nc.ConnectedServerName() == name
}
