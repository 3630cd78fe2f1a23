package rig

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// NATSServer is a private standalone nats-server with JetStream (binary from
// servicetest.NATSServerBin) that a scenario can stop and start again on the same port
// with the same store, as an operator's restart does.
type NATSServer struct {
	t   testing.TB
	URL string
	// ProfileAddr serves the server's net/http/pprof when ProfileNATS was set.
	ProfileAddr string

	args []string
	log  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// ProfileNATS makes StartNATS run the servers with their pprof endpoint (nats-server's
// --profile), for shipbench -profile.
var ProfileNATS bool

// NATSConfig, when set, is a configuration file StartNATS's servers load (-c).
var NATSConfig string

// StartNATS runs a private nats-server until the test ends.
func StartNATS(t testing.TB) *NATSServer {
	t.Helper()
	addr := servicetest.FreeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	n := &NATSServer{t: t, URL: "nats://" + addr, log: filepath.Join(dir, "nats.log"),
		args: []string{servicetest.NATSServerBin(t), "-a", host, "-p", port, "-js", "-sd", filepath.Join(dir, "store")}}
	if NATSConfig != "" {
		n.args = append(n.args, "-c", NATSConfig)
	}
	if ProfileNATS {
		n.ProfileAddr = servicetest.FreeAddr(t)
		_, pport, _ := net.SplitHostPort(n.ProfileAddr)
		n.args = append(n.args, "--profile", pport)
	}
	t.Cleanup(n.Kill)
	n.Start()
	return n
}

// Start starts the server (again) and waits until it accepts connections.
func (n *NATSServer) Start() {
	n.t.Helper()
	n.mu.Lock()
	if n.cmd != nil {
		n.mu.Unlock()
		n.t.Fatal("nats-server is already running")
	}
	f, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		n.mu.Unlock()
		n.t.Fatal(err)
	}
	cmd := exec.Command(n.args[0], n.args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		n.mu.Unlock()
		n.t.Fatalf("start nats-server: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()
	addr := n.URL[len("nats://"):]
	servicetest.WaitFor(n.t, 30*time.Second, "nats-server on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// Kill sends SIGKILL (a crash); Stop sends SIGTERM (a clean restart's first half).
func (n *NATSServer) Kill() { n.signal(syscall.SIGKILL) }

// Stop shuts the server down cleanly and waits for it to exit.
func (n *NATSServer) Stop() { n.signal(syscall.SIGTERM) }

func (n *NATSServer) signal(sig syscall.Signal) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Freeze stops the process (SIGSTOP) without closing its sockets; Thaw resumes it.
func (n *NATSServer) Freeze() { n.sendRaw(syscall.SIGSTOP) }

// Thaw resumes a frozen server.
func (n *NATSServer) Thaw() { n.sendRaw(syscall.SIGCONT) }

func (n *NATSServer) sendRaw(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		_ = n.cmd.Process.Signal(sig)
	}
}

// Pid is the server process's id, 0 while it is stopped.
func (n *NATSServer) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}
