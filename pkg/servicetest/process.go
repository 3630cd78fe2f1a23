package servicetest

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BuildBinaries builds each main package of pkgs (a name → a package path, relative
// to the working directory or an import path) with `go build -o dir/<name>` and
// returns each name's binary. It takes no testing.TB so that TestMain can call it
// once for a package's tests; the compiler's output goes to stderr.
func BuildBinaries(dir string, pkgs map[string]string) (map[string]string, error) {
	names := make([]string, 0, len(pkgs))
	for name := range pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	bins := make(map[string]string, len(pkgs))
	for _, name := range names {
		bin := filepath.Join(dir, name)
		build := exec.Command("go", "build", "-o", bin, pkgs[name])
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("build %s (%s): %w", name, pkgs[name], err)
		}
		bins[name] = bin
	}
	return bins, nil
}

// RunWithBinaries is a TestMain: it builds pkgs (BuildBinaries) into a temporary
// directory, stores the binaries' paths in *bins, runs the package's tests, removes
// the directory and exits with the tests' code. A failed build exits with 1.
func RunWithBinaries(m *testing.M, bins *map[string]string, pkgs map[string]string) {
	dir, err := os.MkdirTemp("", "shipfile-test-bins-")
	if err == nil {
		*bins, err = BuildBinaries(dir, pkgs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// StopTimeout is how long a Process has to exit after SIGTERM at the end of its test
// before it is killed.
const StopTimeout = 30 * time.Second

// Process is a binary a test runs (a service, usually); its output is kept in memory.
type Process struct {
	name string
	logs logBuffer
}

// StartProcess runs bin with args and env (added to this process's environment) until
// the test ends. Then it gets SIGTERM and StopTimeout to exit before SIGKILL, and its
// output is logged if the test failed.
func StartProcess(t testing.TB, bin string, env []string, args ...string) *Process {
	t.Helper()
	p := &Process{name: filepath.Base(bin)}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &p.logs, &p.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(StopTimeout):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", p.name, p.Logs())
		}
	})
	return p
}

// Logs returns the process's output (stdout and stderr) so far.
func (p *Process) Logs() string { return p.logs.String() }

// RunCommand runs bin with args and env (added to this process's environment) to
// completion and returns its output (stdout and stderr); a failure fails the test
// with that output.
func RunCommand(t testing.TB, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v %s", filepath.Base(bin), args, err, out)
	}
	return string(out)
}

// WaitReady waits up to 60s for http://addr/readyz to answer 200, failing the test
// after that.
func WaitReady(t testing.TB, addr string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	WaitFor(t, 60*time.Second, addr+"/readyz", func() bool {
		resp, err := client.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// logBuffer collects a process's output: the process's writers and the test use it
// at once.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
