package servicetest

import (
	"crypto/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// MinIO is a private MinIO server process on 127.0.0.1 with its own data directory,
// for tests that stop and restart the object store (never the shared one on 9000).
type MinIO struct {
	// Endpoint is host:port, as SHIPFILE_S3_ENDPOINT wants it.
	Endpoint string
	// AccessKey and SecretKey are the root credentials of this server.
	AccessKey, SecretKey string

	t       testing.TB
	bin     string
	dataDir string
	logPath string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// MinIOBin finds a minio binary: SHIPFILE_MINIO_BIN, the project's cache (scripts/dev.sh
// builds the pinned one there), or PATH.
func MinIOBin(t testing.TB) string {
	t.Helper()
	candidates := []string{os.Getenv("SHIPFILE_MINIO_BIN")}
	if dir, err := os.UserCacheDir(); err == nil {
		candidates = append(candidates, filepath.Join(dir, "shipfile", "bin", "minio"))
	}
	if p, err := exec.LookPath("minio"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c); c != "" && err == nil && !fi.IsDir() {
			return c
		}
	}
	t.Fatal("no minio binary: run make up (it builds one into ~/.cache/shipfile/bin) or set SHIPFILE_MINIO_BIN")
	return ""
}

// StartMinIO runs a private MinIO server for the test, on a free port and a temporary
// data directory, and returns it once it serves requests. It is killed when
// the test ends.
func StartMinIO(t testing.TB) *MinIO {
	t.Helper()
	m := &MinIO{
		Endpoint:  FreeAddr(t),
		AccessKey: "test-" + rand.Text()[:8],
		SecretKey: rand.Text(),
		t:         t,
		bin:       MinIOBin(t),
		dataDir:   t.TempDir(),
		logPath:   filepath.Join(t.TempDir(), "minio.log"),
	}
	t.Cleanup(func() {
		m.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(m.logPath); err == nil {
				t.Logf("private minio's log:\n%s", b)
			}
		}
	})
	m.Start()
	return m
}

// Start (re)starts the server on the same port and data directory, so objects stored
// before a Stop are there again, and waits until it serves requests: its cluster
// health check answers 200 (the liveness probe answers before the object layer is
// initialised).
func (m *MinIO) Start() {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		m.t.Fatal("servicetest: minio is already running")
	}
	logFile, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		m.t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(m.bin, "server", "--quiet", "--address", m.Endpoint, m.dataDir)
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+m.AccessKey,
		"MINIO_ROOT_PASSWORD="+m.SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	m.cmd = cmd
	client := &http.Client{Timeout: time.Second}
	WaitFor(m.t, 60*time.Second, "private minio on "+m.Endpoint, func() bool {
		resp, err := client.Get("http://" + m.Endpoint + "/minio/health/cluster")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// Stop kills the server (as a crash or an outage would) and waits until its port
// refuses connections. Stopping a stopped server does nothing.
func (m *MinIO) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	_ = m.cmd.Wait()
	m.cmd = nil
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", m.Endpoint, 200*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(50 * time.Millisecond)
	}
}
