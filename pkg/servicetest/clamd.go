package servicetest

import (
	"bytes"
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
)

// EICAR is the EICAR anti-virus test file, assembled here so that no file of the
// repository holds it whole (a virus scanner on a developer's machine would flag it).
var EICAR = []byte(`X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR` + `-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`)

// ClamdAlerts are the clamd.conf options every shipped configuration sets
// (scripts/dev.sh, docker-compose.yml, deploy/): clamd names what it could not judge
// instead of answering OK (docs/SCANNING.md).
const ClamdAlerts = "AlertExceedsMax yes\nAlertEncrypted yes\nAlertEncryptedArchive yes\nAlertEncryptedDoc yes\nAlertBrokenExecutables yes\n"

// Clamd is a private clamd process (Debian's clamav-daemon) with a signature database of
// EICAR's signature alone (made with sigtool), on a port of its own, for tests that stop,
// freeze and restart it (never the shared one of scripts/dev.sh).
type Clamd struct {
	// Addr is the host:port clamd listens on.
	Addr string

	t    testing.TB
	bin  string
	conf string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// ClamdBin finds clamd: SHIPFILE_CLAMD_BIN, PATH, or Debian's /usr/sbin/clamd.
func ClamdBin(t testing.TB) string {
	t.Helper()
	candidates := []string{os.Getenv("SHIPFILE_CLAMD_BIN")}
	if p, err := exec.LookPath("clamd"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range append(candidates, "/usr/sbin/clamd") {
		if fi, err := os.Stat(c); c != "" && err == nil && !fi.IsDir() {
			return c
		}
	}
	t.Fatal("no clamd: scripts/dev.sh clamd installs clamav-daemon with apt-get, or set SHIPFILE_CLAMD_BIN")
	return ""
}

// StartClamd writes the test database and a clamd.conf with extra (clamd.conf lines, e.g.
// size limits) and the shipped Alert* options into a temporary directory, starts clamd and
// returns once it answers PING. It is stopped when the test ends.
func StartClamd(t testing.TB, extra string) *Clamd {
	t.Helper()
	bin := ClamdBin(t)
	sigtool, err := exec.LookPath("sigtool")
	if err != nil {
		t.Fatal("no sigtool: apt-get install clamav (scripts/dev.sh clamd does it)")
	}
	cmd := exec.Command(sigtool, "--hex-dump")
	cmd.Stdin = bytes.NewReader(EICAR)
	hex, err := cmd.Output()
	if err != nil || len(bytes.TrimSpace(hex)) == 0 {
		t.Fatalf("sigtool --hex-dump: %v", err)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	if err := os.MkdirAll(db, 0o755); err != nil {
		t.Fatal(err)
	}
	ndb := fmt.Sprintf("Eicar-Test-Signature:0:*:%s\n", bytes.TrimSpace(hex))
	if err := os.WriteFile(filepath.Join(db, "shipfile-test.ndb"), []byte(ndb), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Clamd{t: t, bin: bin, conf: filepath.Join(dir, "clamd.conf"), Addr: FreeAddr(t)}
	_, port, _ := net.SplitHostPort(c.Addr)
	conf := fmt.Sprintf("Foreground yes\nDatabaseDirectory %s\nTCPSocket %s\nTCPAddr 127.0.0.1\nLogFile %s\nMaxThreads 4\nSelfCheck 3600\n%s%s",
		db, port, filepath.Join(dir, "clamd.log"), extra, ClamdAlerts)
	if err := os.WriteFile(c.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(c.Stop)
	return c
}

// Start starts clamd (again) and waits until it answers PING.
func (c *Clamd) Start() {
	c.t.Helper()
	c.mu.Lock()
	c.cmd = exec.Command(c.bin, "-c", c.conf)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		c.mu.Unlock()
		c.t.Fatal(err)
	}
	c.mu.Unlock()
	WaitFor(c.t, 60*time.Second, "clamd to answer PING on "+c.Addr, c.answers)
}

// Stop stops clamd (SIGTERM, then SIGKILL) and waits until it is gone.
func (c *Clamd) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGCONT) // in case a test froze it
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
	c.cmd = nil
}

// Signal sends sig to the running clamd (SIGSTOP freezes it, SIGCONT thaws it).
func (c *Clamd) Signal(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		_ = c.cmd.Process.Signal(sig)
	}
}

// answers reports whether clamd answers PING.
func (c *Clamd) answers() bool {
	conn, err := net.DialTimeout("tcp", c.Addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("zPING\x00")); err != nil {
		return false
	}
	b := make([]byte, 16)
	n, _ := conn.Read(b)
	return strings.HasPrefix(string(b[:n]), "PONG")
}
