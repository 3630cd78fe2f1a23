package rig

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// addrVars names the variable each service listens on for its API or ops endpoints.
var addrVars = map[string]string{
	"gateway":  "SHIPFILE_HTTP_ADDR",
	"webhooks": "SHIPFILE_WEBHOOKS_ADDR",
	"mailer":   "SHIPFILE_MAILER_ADDR",
	"expiry":   "SHIPFILE_EXPIRY_ADDR",
	"scanner":  "SHIPFILE_SCANNER_ADDR",
}

// Proc is a service process: started with its environment, killed or stopped and
// started again with the same settings (and the same address). Its output goes to a
// log file, shown by Logs.
type Proc struct {
	t    testing.TB
	Name string
	Bin  string
	Args []string
	// Addr is where it serves HTTP (/readyz, and the API for the gateway).
	Addr string
	// OpsAddr, when set, is where it serves /readyz and /metrics instead (the
	// gateway's SHIPFILE_OPS_ADDR).
	OpsAddr string
	// PprofAddr serves net/http/pprof when the binaries were built with BuildOptions.Pprof.
	PprofAddr string
	Env       []string
	log       string

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when the current process has been reaped.
	exited chan struct{}
}

// StartService runs the service binary bins[name] with env (SHIPFILE_* settings; its
// listen address is added) and waits until /readyz answers 200. The process is killed
// when the test ends.
func StartService(t testing.TB, bins Bins, name string, env ...string) *Proc {
	t.Helper()
	p := NewService(t, bins, name, env...)
	p.Start()
	p.WaitReady(60 * time.Second)
	return p
}

// NewService prepares a service process without starting it: bins[name] with env and
// its listen address (a free port) in the variable the service reads.
func NewService(t testing.TB, bins Bins, name string, env ...string) *Proc {
	t.Helper()
	bin, ok := bins.Path[name]
	if !ok {
		t.Fatalf("binary %s was not built", name)
	}
	addr := servicetest.FreeAddr(t)
	env = append(append([]string{}, env...), addrVars[name]+"="+addr)
	var pprofAddr string
	if bins.Pprof {
		pprofAddr = servicetest.FreeAddr(t)
		env = append(env, "SHIPBENCH_PPROF_ADDR="+pprofAddr)
	}
	var opsAddr string
	if name == "gateway" {
		opsAddr = servicetest.FreeAddr(t)
		env = append(env, "SHIPFILE_OPS_ADDR="+opsAddr)
	}
	p := NewProc(t, name, addr, bin, nil, env)
	p.PprofAddr, p.OpsAddr = pprofAddr, opsAddr
	return p
}

// NewProc prepares any process serving /readyz on addr: bin with args and env (added to
// this process's environment). It is killed when the test ends.
func NewProc(t testing.TB, name, addr, bin string, args, env []string) *Proc {
	t.Helper()
	p := &Proc{t: t, Name: name, Bin: bin, Args: args, Addr: addr, Env: env}
	p.log = filepath.Join(t.TempDir(), name+".log")
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("last lines of %s's output:\n%s", name, p.Logs(40))
		}
	})
	return p
}

// Start starts the process (again); it must not be running.
func (p *Proc) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		p.t.Fatalf("%s is already running", p.Name)
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	fmt.Fprintf(f, "=== %s start\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		p.t.Fatalf("start %s: %v", p.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
}

// Pid is the running process's id (0 when it does not run).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process was started and has not exited.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and reaps the process; a no-op when it does not run.
func (p *Proc) Kill() { p.signal(syscall.SIGKILL, 0) }

// Stop sends SIGTERM and waits up to within for a graceful exit, then kills.
func (p *Proc) Stop(within time.Duration) { p.signal(syscall.SIGTERM, within) }

func (p *Proc) signal(sig syscall.Signal, within time.Duration) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // in case it was frozen
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
		return
	case <-time.After(within):
	}
	_ = cmd.Process.Kill()
	<-exited
}

// URL is the base URL of the process's HTTP server plus path.
func (p *Proc) URL(path string) string { return "http://" + p.Addr + path }

// OpsURL is the URL of path (/readyz, /metrics) on the process's ops address.
func (p *Proc) OpsURL(path string) string {
	if p.OpsAddr != "" {
		return "http://" + p.OpsAddr + path
	}
	return p.URL(path)
}

// WaitReady waits until /readyz answers 200, failing when the process exits first or
// within passes.
func (p *Proc) WaitReady(within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(p.OpsURL("/readyz"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if !p.Running() {
			p.t.Fatalf("%s exited before it was ready:\n%s", p.Name, p.Logs(30))
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s not ready after %s:\n%s", p.Name, within, p.Logs(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Logs returns the last n lines of the process's output.
func (p *Proc) Logs(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// ProcStatusKiB reads a "Vm…: N kB" line (VmRSS, VmHWM) of /proc/<pid>/status.
func ProcStatusKiB(pid int, field string) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// ResetPeakRSS resets the process's VmHWM to its current RSS (Linux clear_refs 5).
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// CPUProfile records the process's CPU profile for d (through PprofAddr) into path.
func (p *Proc) CPUProfile(ctx context.Context, d time.Duration, path string) error {
	return p.pprof(ctx, fmt.Sprintf("profile?seconds=%d", max(1, int(d.Seconds()))), path)
}

// HeapProfile saves the process's heap profile (through PprofAddr) into path.
func (p *Proc) HeapProfile(ctx context.Context, path string) error {
	return p.pprof(ctx, "heap", path)
}

func (p *Proc) pprof(ctx context.Context, what, path string) error {
	if p.PprofAddr == "" {
		return fmt.Errorf("%s was not built with a pprof endpoint", p.Name)
	}
	return fetchPprof(ctx, p.PprofAddr, what, path)
}

// CPUProfileAt records the CPU profile of the process serving net/http/pprof on addr
// (a nats-server started with ProfileNATS, say) for d into path.
func CPUProfileAt(ctx context.Context, addr string, d time.Duration, path string) error {
	return fetchPprof(ctx, addr, fmt.Sprintf("profile?seconds=%d", max(1, int(d.Seconds()))), path)
}

func fetchPprof(ctx context.Context, addr, what, path string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/debug/pprof/%s", addr, what), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
