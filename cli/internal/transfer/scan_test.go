package transfer

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

// TestScanRefused: a file refused for good because of its scan is a *ScanError that says
// how it can be released: by its package's owner, with the command itself when the
// owner is the one fetching it.
func TestScanRefused(t *testing.T) {
	pkg, file := uuid.New(), apiclient.LinkFile{Id: uuid.New(), Filename: "a.zip"}
	refusal := func(scan string) error {
		return &api.Error{Status: http.StatusConflict, Detail: "held", Scan: scan}
	}
	for _, tc := range []struct {
		name  string
		owner bool
		err   error
		want  string // "" when it is not a refusal for good
	}{
		{"unscannable, through a link", false, refusal(ScanUnscannable),
			"not downloaded: it could not be checked for malware (scan: unscannable; the package's owner can release it with 'shipfile release'): held (HTTP 409)"},
		{"failed, through a link", false, refusal(ScanFailed),
			"not downloaded: its check for malware failed (scan: error; the package's owner can release it with 'shipfile release'): held (HTTP 409)"},
		{"unscannable, the owner", true, refusal(ScanUnscannable),
			"not downloaded: it could not be checked for malware (scan: unscannable; to fetch it unchecked, release it: shipfile release " + pkg.String() + " " + file.Id.String() + "): held (HTTP 409)"},
		{"failed, the owner", true, refusal(ScanFailed),
			"not downloaded: its check for malware failed (scan: error; to fetch it unchecked, release it: shipfile release " + pkg.String() + " " + file.Id.String() + "): held (HTTP 409)"},
		{"infected, the owner", true, refusal(ScanInfected), "not downloaded: malware found (scan: infected): held (HTTP 409)"},
		{"pending", true, refusal(ScanPending), ""},
		{"another conflict", true, &api.Error{Status: http.StatusConflict, Detail: "package revoked"}, ""},
		{"not found", true, &api.Error{Status: http.StatusNotFound, Detail: "no"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Downloader{}
			if tc.owner {
				d.Package = pkg
			}
			err := d.scanRefused(file, tc.err)
			var se *ScanError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("a refusal for good: %v", err)
			case tc.want != "" && (!errors.As(err, &se) || err.Error() != tc.want):
				t.Fatalf("got %v, want %q", err, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), "held"):
				t.Fatalf("the server's detail is lost: %v", err)
			}
		})
	}
}
