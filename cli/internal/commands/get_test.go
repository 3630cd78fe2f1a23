package commands

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/apiclient"
)

// fakeFile is a file of fakeLink.
type fakeFile struct {
	name string
	body []byte
	scan string
	// held is how many download requests answer 409 with Retry-After (still being
	// checked) before the bytes are served.
	held int
	// refused, when set, is the detail of a 409 without Retry-After that every download
	// request gets (a file that could not be checked).
	refused string
}

// fakeLink is a link's side of a shipfile server, in a test's own HTTP server.
type fakeLink struct {
	title      string
	encryption apiclient.Encryption
	files      []fakeFile
	mu         sync.Mutex
	ids        []uuid.UUID
}

func (l *fakeLink) serve(t *testing.T) string {
	t.Helper()
	for range l.files {
		l.ids = append(l.ids, uuid.New())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/links/tok", func(w http.ResponseWriter, r *http.Request) {
		pkg := apiclient.LinkPackage{Id: uuid.New(), Title: l.title, Encryption: l.encryption, State: "active", FileCount: len(l.files),
			ExpiresAt: time.Now().Add(time.Hour), Direction: "outbound", Files: []apiclient.LinkFile{}}
		for i, f := range l.files {
			sum := sha256.Sum256(f.body)
			pkg.Files = append(pkg.Files, apiclient.LinkFile{Id: l.ids[i], Filename: f.name, Size: int64(len(f.body)),
				Sha256: hex.EncodeToString(sum[:]), Scan: apiclient.LinkFileScan(f.scan), UploadedBy: apiclient.LinkFileUploadedByOwner})
			pkg.TotalSize += int64(len(f.body))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(pkg)
	})
	mux.HandleFunc("GET /api/v1/links/tok/files/{id}", func(w http.ResponseWriter, r *http.Request) {
		i := slices.Index(l.ids, uuid.MustParse(r.PathValue("id")))
		l.mu.Lock()
		f := &l.files[i]
		held := f.held > 0
		if held {
			f.held--
		}
		l.mu.Unlock()
		switch {
		case f.refused != "":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(map[string]string{"detail": f.refused})
		case held:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(map[string]string{"detail": "this file is being checked for malware; try again shortly"})
		default:
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(f.body)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/p/tok"
}

// names lists the names in dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestGetWritesSafeNames(t *testing.T) {
	l := &fakeLink{title: "Hello \x1b]0;pwned\x07\x1b[2J", encryption: apiclient.EncryptionNone, files: []fakeFile{
		{name: ".bashrc", body: []byte("echo pwned")},
		{name: "CON", body: []byte("con")},
		{name: "a:b.txt", body: []byte("colon")},
		{name: "a_b.txt", body: []byte("underscore")},
		{name: "../escape.txt", body: []byte("up")},
		{name: "red\x1b[31m.txt", body: []byte("esc")},
		{name: "invoice\u202Efdp.exe", body: []byte("bidi")},
	}}
	link := l.serve(t)
	dir := t.TempDir()
	code, stdout, stderr := runMain(t, "", "get", link, "-o", dir)
	if code != ExitOK {
		t.Fatalf("get: exit %d, stderr %q", code, stderr)
	}
	want := []string{"_._escape.txt", "_CON", "_bashrc", "a_b (2).txt", "a_b.txt", "invoice_fdp.exe", "red_[31m.txt"}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Fatalf("get wrote %q, want %q", got, want)
	}
	for name, body := range map[string]string{"_bashrc": "echo pwned", "a_b.txt": "colon", "a_b (2).txt": "underscore"} {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != body {
			t.Errorf("%s holds %q, want %q", name, b, body)
		}
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(dir), "escape.txt")); err == nil {
		t.Error("a file was written outside the directory")
	}
	for _, s := range []string{stdout, stderr} {
		if strings.ContainsAny(s, "\x1b\x07\u202e") {
			t.Errorf("get printed a raw control or format character: %q", s)
		}
	}
	if !strings.Contains(stderr, `\x1b]0;pwned\a\x1b[2J`) {
		t.Errorf("the title is not printed escaped: %q", stderr)
	}
}

func TestGetRefusesSymlinks(t *testing.T) {
	for _, tc := range []struct{ name, link string }{
		{"the output file", "notes.txt"},
		{"the part file", "notes.txt.part"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &fakeLink{title: "t", encryption: apiclient.EncryptionNone, files: []fakeFile{{name: "notes.txt", body: []byte("from the server")}}}
			link := l.serve(t)
			dir := t.TempDir()
			target := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(target, []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(dir, tc.link)); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := runMain(t, "", "get", link, "-o", dir)
			if code != ExitFailed || !strings.Contains(stderr, "symbolic link") {
				t.Fatalf("get: exit %d, stderr %q; want 1 and a word about the symbolic link", code, stderr)
			}
			if b, _ := os.ReadFile(target); string(b) != "mine" {
				t.Fatalf("the symlink's target now holds %q", b)
			}
			if fi, err := os.Lstat(filepath.Join(dir, tc.link)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("the symlink was replaced: %v", err)
			}
		})
	}
	t.Run("a dangling symlink", func(t *testing.T) {
		l := &fakeLink{title: "t", encryption: apiclient.EncryptionNone, files: []fakeFile{{name: "notes.txt", body: []byte("from the server")}}}
		link := l.serve(t)
		dir := t.TempDir()
		target := filepath.Join(t.TempDir(), "created")
		if err := os.Symlink(target, filepath.Join(dir, "notes.txt.part")); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := runMain(t, "", "get", link, "-o", dir); code != ExitFailed {
			t.Fatalf("get: exit %d, stderr %q", code, stderr)
		}
		if _, err := os.Lstat(target); err == nil {
			t.Fatal("a file was created through the dangling symlink")
		}
	})
}

func TestGetResumesARegularPart(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 1000)
	l := &fakeLink{title: "t", encryption: apiclient.EncryptionNone, files: []fakeFile{{name: "data.bin", body: body}}}
	link := l.serve(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.bin.part"), body[:3000], 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runMain(t, "", "get", link, "-o", dir, "--json")
	if code != ExitOK {
		t.Fatalf("get: exit %d, stderr %q", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "data.bin")); !bytes.Equal(b, body) {
		t.Fatal("the resumed file differs from the server's")
	}
	if got := names(t, dir); !slices.Equal(got, []string{"data.bin"}) {
		t.Fatalf("left %q", got)
	}
}

func TestGetRefusesADowngrade(t *testing.T) {
	l := &fakeLink{title: "t", encryption: apiclient.EncryptionNone, files: []fakeFile{{name: "secret.txt", body: []byte("plaintext")}}}
	link := l.serve(t)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	code, stdout, stderr := runMain(t, "", "get", link+"#"+id.String(), "-o", dir)
	if code != ExitFailed || !strings.Contains(stderr, "not encrypted: refused") || stdout != "" {
		t.Fatalf("get: exit %d, stdout %q, stderr %q; want 1 and the refusal", code, stdout, stderr)
	}
	if strings.Contains(stderr, id.String()) {
		t.Fatal("the error printed the link's key")
	}
	if got := names(t, dir); len(got) != 0 {
		t.Fatalf("a refused get wrote %q", got)
	}
}

func TestGetWaitsForTheScan(t *testing.T) {
	t.Run("served once checked", func(t *testing.T) {
		l := &fakeLink{title: "t", encryption: apiclient.EncryptionNone, files: []fakeFile{{name: "a.pdf", body: []byte("pdf"), scan: "pending", held: 2}}}
		link := l.serve(t)
		dir := t.TempDir()
		code, _, stderr := runMain(t, "", "get", link, "-o", dir)
		if code != ExitOK || !strings.Contains(stderr, "waiting for a.pdf: being checked for malware") {
			t.Fatalf("get: exit %d, stderr %q; want 0 and the wait said", code, stderr)
		}
		if strings.Count(stderr, "waiting for") != 1 {
			t.Errorf("the wait was said more than once: %q", stderr)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "a.pdf")); string(b) != "pdf" {
			t.Fatalf("a.pdf holds %q", b)
		}
	})
	t.Run("still pending after --wait", func(t *testing.T) {
		l := &fakeLink{title: "t", encryption: apiclient.EncryptionNone, files: []fakeFile{{name: "a.pdf", body: []byte("pdf"), scan: "pending", held: 1000}}}
		link := l.serve(t)
		dir := t.TempDir()
		start := time.Now()
		code, _, stderr := runMain(t, "", "get", link, "-o", dir, "--wait", "1500ms")
		took := time.Since(start)
		if code != ExitFailed || !strings.Contains(stderr, "a.pdf: still being checked for malware after waiting 1.5s (scan: pending)") {
			t.Fatalf("get: exit %d, stderr %q", code, stderr)
		}
		if took < 1500*time.Millisecond || took > 10*time.Second {
			t.Errorf("get gave up after %s, want about --wait 1.5s", took)
		}
		if got := names(t, dir); len(got) != 0 {
			t.Fatalf("a held file left %q", got)
		}
	})
	t.Run("an encrypted file still pending leaves nothing", func(t *testing.T) {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		var cipher bytes.Buffer
		w, _ := age.Encrypt(&cipher, id.Recipient())
		_, _ = w.Write([]byte("secret"))
		_ = w.Close()
		l := &fakeLink{title: "t", encryption: apiclient.EncryptionAge, files: []fakeFile{{name: "file-1.age", body: cipher.Bytes(), scan: "skipped", held: 1000}}}
		link := l.serve(t)
		dir := t.TempDir()
		code, _, stderr := runMain(t, "", "get", link+"#"+id.String(), "-o", dir, "--wait", "1s")
		if code != ExitFailed || !strings.Contains(stderr, "still being checked for malware") {
			t.Fatalf("get: exit %d, stderr %q", code, stderr)
		}
		if got := names(t, dir); len(got) != 0 {
			t.Fatalf("a held encrypted file left %q", got)
		}
	})
	t.Run("could not be checked: fails at once", func(t *testing.T) {
		for _, state := range []string{"unscannable", "error"} {
			l := &fakeLink{title: "t", encryption: apiclient.EncryptionNone, files: []fakeFile{{name: "a.zip", body: []byte("zip"), scan: state,
				refused: "this file could not be checked for malware and cannot be downloaded through the link"}}}
			link := l.serve(t)
			start := time.Now()
			code, _, stderr := runMain(t, "", "get", link, "-o", t.TempDir())
			if code != ExitFailed || !strings.Contains(stderr, "(scan: "+state+"; the package's owner can release it with 'shipfile release')") ||
				!strings.Contains(stderr, "could not be checked for malware and cannot") {
				t.Fatalf("get of a %s file: exit %d, stderr %q", state, code, stderr)
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("get of a %s file took %s: it waited", state, took)
			}
		}
	})
}

func TestErrorDetailIsEscaped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"detail":"no such link\u001b[2J\u001b]0;owned\u0007"}`))
	}))
	defer srv.Close()
	code, _, stderr := runMain(t, "", "get", srv.URL+"/p/tok")
	if code != ExitFailed || strings.ContainsAny(stderr, "\x1b\x07") || !strings.Contains(stderr, `no such link\x1b[2J\x1b]0;owned\a`) {
		t.Fatalf("get: exit %d, stderr %q; want 1 and the detail escaped", code, stderr)
	}
}
