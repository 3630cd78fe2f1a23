package servicetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSCluster is a private JetStream cluster: nats-server processes on 127.0.0.1 (binary
// from NATSServerBin), routed to each other, each with its own store directory. The test
// may kill any node.
type NATSCluster struct {
	// URLs are the nodes' client URLs, in node order.
	URLs []string

	mu   sync.Mutex
	cmds []*exec.Cmd
}

// StartNATSCluster runs an n-node JetStream cluster for the test and returns once
// JetStream answers through every node (a meta leader is elected). The processes are
// killed when the test ends.
func StartNATSCluster(t testing.TB, n int) *NATSCluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("StartNATSCluster: %d nodes", n)
	}
	bin := NATSServerBin(t)
	clients := make([]string, n)
	routes := make([]string, n)
	for i := range n {
		clients[i] = FreeAddr(t)
		routes[i] = FreeAddr(t)
	}
	routeURLs := make([]string, n)
	for i, a := range routes {
		routeURLs[i] = "nats-route://" + a
	}
	c := &NATSCluster{cmds: make([]*exec.Cmd, n)}
	t.Cleanup(func() {
		for i := range n {
			c.Kill(i)
		}
	})
	// A name of its own, so that a route that reaches another test's cluster (ports are
	// picked free, then released) is refused rather than joining the two.
	name := "shipfile-" + strings.ToLower(rand.Text()[:10])
	for i := range n {
		host, port, _ := net.SplitHostPort(clients[i])
		args := []string{"-a", host, "-p", port, "-js", "-sd", t.TempDir(),
			"--server_name", fmt.Sprintf("n%d", i+1)}
		if n > 1 {
			args = append(args, "--cluster_name", name, "--cluster", "nats://"+routes[i],
				"--routes", strings.Join(routeURLs, ","))
		}
		cmd := exec.Command(bin, args...)
		logf, err := os.Create(filepath.Join(t.TempDir(), "nats.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		t.Cleanup(func() {
			logf.Close()
			if t.Failed() {
				t.Logf("nats node %d's log:\n%s", i+1, tail(logf.Name(), 30))
			}
		})
		if err := cmd.Start(); err != nil {
			t.Fatalf("start nats node %d: %v", i+1, err)
		}
		c.cmds[i] = cmd
		c.URLs = append(c.URLs, "nats://"+clients[i])
	}
	for _, u := range c.URLs {
		var last error
		WaitFor(t, 60*time.Second, "JetStream through "+u, func() bool {
			last = jetStreamAnswers(u)
			return last == nil
		})
	}
	return c
}

// URL is the comma-separated list of the nodes' URLs, as SHIPFILE_NATS_URL takes it.
func (c *NATSCluster) URL() string { return strings.Join(c.URLs, ",") }

// Kill sends SIGKILL to node i (0-based) and reaps it: a crash. Killing a node twice is
// harmless.
func (c *NATSCluster) Kill(i int) {
	c.mu.Lock()
	cmd := c.cmds[i]
	c.cmds[i] = nil
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // in case the test froze it
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// jetStreamAnswers reports whether a JetStream account info request through url succeeds.
func jetStreamAnswers(url string) error {
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
