package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/apiclient"
)

// fakeRelease is a server with one package of the user's: GET answers the package,
// POST .../release releases an unscannable or failed file (answering a released one as
// it is) and refuses any other with 409, as the gateway does.
type fakeRelease struct {
	mu       sync.Mutex
	pkg      apiclient.PackageDetail
	released []uuid.UUID
}

func (s *fakeRelease) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	base := "/api/v1/packages/" + s.pkg.Id.String()
	if r.Header.Get("Authorization") != "Bearer sf_test" || !strings.HasPrefix(r.URL.Path, base) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"detail":"package not found"}`))
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == base {
		_ = json.NewEncoder(w).Encode(s.pkg)
		return
	}
	for i, f := range s.pkg.Files {
		if r.Method != http.MethodPost || r.URL.Path != base+"/files/"+f.Id.String()+"/release" {
			continue
		}
		if f.Scan != apiclient.FileScanUnscannable && f.Scan != apiclient.FileScanError {
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"detail":"only a file that could not be checked for malware (unscannable or error) can be released; this one is ` + string(f.Scan) + `\u001b[2J"}`))
			return
		}
		if f.ScanReleasedAt == nil {
			now, by := time.Now(), int64(1)
			s.pkg.Files[i].ScanReleasedAt, s.pkg.Files[i].ScanReleasedBy = &now, &by
			s.released = append(s.released, f.Id)
		}
		_ = json.NewEncoder(w).Encode(s.pkg.Files[i])
		return
	}
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"detail":"file not found"}`))
}

func TestRelease(t *testing.T) {
	sig := "Heuristics.Encrypted.Zip"
	earlier := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	zip, failed, clean, twin1, twin2, done := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	srv := &fakeRelease{pkg: apiclient.PackageDetail{Id: uuid.New(), Title: "t", RecipientEmail: "nina@example.com", State: "active", Direction: "inbound", Files: []apiclient.File{
		{Id: zip, Filename: "archive.zip", Scan: apiclient.FileScanUnscannable, ScanSignature: &sig},
		{Id: failed, Filename: "big.iso", Scan: apiclient.FileScanError},
		{Id: clean, Filename: "a.pdf", Scan: apiclient.FileScanClean},
		{Id: twin1, Filename: "twin.bin", Scan: apiclient.FileScanUnscannable},
		{Id: twin2, Filename: "twin.bin", Scan: apiclient.FileScanUnscannable},
		{Id: done, Filename: "old.7z", Scan: apiclient.FileScanUnscannable, ScanReleasedAt: &earlier},
	}}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	pkg := srv.pkg.Id.String()

	for _, tc := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"by name", []string{"release", pkg, "archive.zip"}, ExitOK,
			"Released archive.zip (file " + zip.String() + ", scan: unscannable: Heuristics.Encrypted.Zip): it is served unchecked\n", ""},
		{"by id, flags after the arguments", []string{"release", pkg, failed.String(), "--quiet"}, ExitOK,
			"Released big.iso (file " + failed.String() + ", scan: error): it is served unchecked\n", ""},
		{"released already", []string{"release", pkg, "old.7z"}, ExitOK,
			"old.7z (file " + done.String() + ") was released already, 2030-01-02 03:04 UTC (scan: unscannable)\n", ""},
		{"a clean file: the API's detail, escaped", []string{"release", pkg, "a.pdf"}, ExitFailed, "",
			`shipfile: a.pdf: only a file that could not be checked for malware (unscannable or error) can be released; this one is clean\x1b[2J (HTTP 409)`},
		{"a name two files have", []string{"release", pkg, "twin.bin"}, ExitFailed, "",
			`has 2 files named "twin.bin": give the file's id (` + twin1.String() + ", " + twin2.String() + ")"},
		{"no such file", []string{"release", pkg, "nope.txt"}, ExitFailed, "", `has no file "nope.txt"`},
		{"another's package", []string{"release", uuid.NewString(), "archive.zip"}, ExitFailed, "", "shipfile: package not found (HTTP 404)"},
		{"not a package id", []string{"release", "archive.zip", pkg}, ExitUsage, "", "is not a package id"},
		{"no file", []string{"release", pkg}, ExitUsage, "", "expected 2 argument(s), got 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runAs(t, hs.URL, tc.args...)
			if code != tc.code || stdout != tc.stdout || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, stderr with %q", code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
			if strings.ContainsAny(stderr, "\x1b") {
				t.Errorf("stderr holds raw control characters: %q", stderr)
			}
		})
	}
	if len(srv.released) != 2 || srv.released[0] != zip || srv.released[1] != failed {
		t.Errorf("released %v, want archive.zip and big.iso once each", srv.released)
	}

	t.Run("--json", func(t *testing.T) {
		code, stdout, stderr := runAs(t, hs.URL, "release", pkg, zip.String(), "--json")
		var f apiclient.File
		if code != ExitOK || json.Unmarshal([]byte(stdout), &f) != nil || f.Id != zip || f.ScanReleasedAt == nil || stderr != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and the file's record", code, stdout, stderr)
		}
		code, stdout, stderr = runAs(t, hs.URL, "release", pkg, "a.pdf", "--json")
		var doc struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
			Status   int    `json:"status"`
		}
		if code != ExitFailed || stdout != "" || json.Unmarshal([]byte(stderr), &doc) != nil || doc.Status != http.StatusConflict ||
			doc.ExitCode != ExitFailed || !strings.Contains(doc.Error, "this one is clean") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want 1 and the error's JSON", code, stdout, stderr)
		}
	})
}

// runAs runs the command line with args against the server at url with the token
// sf_test.
func runAs(t *testing.T, url string, args ...string) (int, string, string) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, "cache"))
	t.Setenv("SHIPFILE_CONFIG", "")
	t.Setenv("SHIPFILE_URL", url)
	t.Setenv("SHIPFILE_TOKEN", "sf_test")
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}
