package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestOwnerReleasesAnUnscannableFile: in SHIPFILE_SCAN=block the owner's `get ID`
// refuses a stranger's upload that clamd could not judge, naming the command that
// releases it; `shipfile release` releases it (show says so) and `get` then fetches it.
// A second release is answered as the first; a clean file cannot be released, nor can
// another user release the owner's file: exit 1 with the API's detail.
func TestOwnerReleasesAnUnscannableFile(t *testing.T) {
	// No scanner runs: the test records the verdict, as services/scanner would.
	sys := startSystem(t, "SHIPFILE_SCAN=block")
	u := newUser(t)
	u.ok(sys.token+"\n", "login", "--url", sys.url)
	req := decode[jsonSend](t, u.ok("", "request", "--from", "stranger@example.com", "--json"))
	link := req.Links[0].MagicLink
	token := link[strings.LastIndex(link, "/p/")+3:]
	body := []byte("PK\x03\x04 an encrypted archive, not really\n")
	fileID := strangerUpload(t, sys, token, "archive.zip", body)
	pkgID := req.Package.Id.String()
	ctx, conn := dbConn(t, sys)
	if _, err := conn.Exec(ctx, "UPDATE files SET scan = 'unscannable', scan_signature = 'Heuristics.Encrypted.Zip', scanned_at = now() WHERE id = $1", fileID); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	r := u.run("", nil, "get", pkgID, "-o", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "archive.zip: not downloaded: it could not be checked for malware (scan: unscannable; "+
		"to fetch it unchecked, release it: shipfile release "+pkgID+" "+fileID+")") {
		t.Fatalf("the owner's get of an unscannable upload: exit %d, stderr %q", r.code, r.stderr)
	}

	// Released by its name, then fetched.
	released := decode[apiclient.File](t, u.ok("", "release", pkgID, "archive.zip", "--json"))
	if released.Id.String() != fileID || released.Scan != apiclient.FileScanUnscannable || released.ScanReleasedAt == nil || released.ScanReleasedBy == nil {
		t.Fatalf("release --json: %+v", released)
	}
	if r := u.ok("", "show", pkgID); !strings.Contains(r.stdout, "unscannable: Heuristics.Encrypted.Zip (released)") {
		t.Fatalf("show lacks the release:\n%s", r.stdout)
	}
	got := decode[jsonGetOwned](t, u.ok("", "get", pkgID, "-o", dir, "--json"))
	if len(got.Files) != 1 || sha256File(t, filepath.Join(dir, "archive.zip")) != hexSHA(body) {
		t.Fatalf("the owner's get of the released upload: %+v", got.Files)
	}

	// Again, by its id: the server answers the file as it is, released already.
	r = u.ok("", "release", pkgID, fileID)
	if !strings.Contains(r.stdout, "archive.zip (file "+fileID+") was released already") {
		t.Fatalf("a second release: stdout %q", r.stdout)
	}
	again := decode[apiclient.File](t, u.ok("", "release", pkgID, fileID, "--json"))
	if again.ScanReleasedAt == nil || !again.ScanReleasedAt.Equal(*released.ScanReleasedAt) {
		t.Fatalf("a second release moved the release: %v, first %v", again.ScanReleasedAt, released.ScanReleasedAt)
	}

	// A clean file: refused with the API's detail.
	cleanID := strangerUpload(t, sys, token, "invoice.pdf", []byte("%PDF-1.4 not really\n"))
	if _, err := conn.Exec(ctx, "UPDATE files SET scan = 'clean', scanned_at = now() WHERE id = $1", cleanID); err != nil {
		t.Fatal(err)
	}
	r = u.run("", nil, "release", pkgID, cleanID)
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "shipfile: invoice.pdf: only a file that could not be checked for malware (unscannable or error) can be released; this one is clean (HTTP 409)") {
		t.Fatalf("release of a clean file: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// Another user: the owner's package is not theirs (the gateway's answer: 403, or 404).
	servicetest.RunCommand(t, bins["shipctl"], sys.env, "user", "create", "--email", "other@example.com", "--name", "Other", "--role", "regular")
	out := servicetest.RunCommand(t, bins["shipctl"], sys.env, "token", "create", "--email", "other@example.com", "--name", "cli")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	otherToken := lines[len(lines)-1]
	other := newUser(t)
	other.ok(otherToken+"\n", "login", "--url", sys.url)
	status, detail := detailOf(t, sys.url, "/api/v1/packages/"+pkgID, otherToken)
	if (status != http.StatusForbidden && status != http.StatusNotFound) || detail == "" {
		t.Fatalf("another user's GET of the package: %d %q", status, detail)
	}
	r = other.run("", nil, "release", pkgID, fileID)
	if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("shipfile: %s (HTTP %d)", detail, status)) {
		t.Fatalf("another user's release: exit %d, stderr %q", r.code, r.stderr)
	}
}
