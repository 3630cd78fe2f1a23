package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/apiclient"
)

func TestShowListsScanStates(t *testing.T) {
	id := uuid.New()
	sig := "Eicar-Test-Signature"
	released := time.Now()
	pkg := apiclient.PackageDetail{Id: id, Title: "Invoices \x1b[31m", RecipientEmail: "nina@example.com", State: "active", Direction: "inbound", FileCount: 4,
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Files: []apiclient.File{
			{Id: uuid.New(), Filename: "a.pdf", Scan: "pending", UploadedBy: "recipient"},
			{Id: uuid.New(), Filename: "b.zip", Scan: "unscannable", UploadedBy: "recipient"},
			{Id: uuid.New(), Filename: "d.zip", Scan: "error", ScanReleasedAt: &released, UploadedBy: "recipient"},
			{Id: uuid.New(), Filename: "c.exe\x1b]0;x\x07", Scan: "infected", ScanSignature: &sig, UploadedBy: "recipient"},
		}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/packages/"+id.String() || r.Header.Get("Authorization") != "Bearer sf_test" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(pkg)
	}))
	defer srv.Close()
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("SHIPFILE_CONFIG", "")
	t.Setenv("SHIPFILE_URL", srv.URL)
	t.Setenv("SHIPFILE_TOKEN", "sf_test")
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"show", id.String()}, IO{In: strings.NewReader(""), Out: &out, Err: &errb}); code != ExitOK {
		t.Fatalf("show: exit %d, stderr %q", code, errb.String())
	}
	text := out.String()
	if !regexp.MustCompile(`(?m)^FILE ID\s+SIZE\s+DOWNLOADS\s+BY\s+SCAN\s+SHA-256\s+NAME$`).MatchString(text) {
		t.Fatalf("show has no SCAN column:\n%s", text)
	}
	for _, want := range []string{`recipient\s+pending\s+.*a\.pdf`, `recipient\s+unscannable\s+.*b\.zip`, `recipient\s+error \(released\)\s+.*d\.zip`,
		`recipient\s+infected: Eicar-Test-Signature\s+.*c\.exe\\x1b\]0;x\\a`, `title\s+Invoices \\x1b\[31m`} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(text) {
			t.Errorf("show lacks a line matching %s:\n%s", want, text)
		}
	}
	if strings.ContainsAny(text, "\x1b\x07") {
		t.Errorf("show printed raw control characters:\n%q", text)
	}
}
