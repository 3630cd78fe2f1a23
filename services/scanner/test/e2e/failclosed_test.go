package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/scanner/internal/testzip"
)

// scanOf waits until file fileID is no longer pending and returns its scan state and
// signature as recorded.
func (s *system) scanOf(fileID string, within time.Duration) (scan, sig string) {
	s.t.Helper()
	servicetest.WaitFor(s.t, within, "file "+fileID+" scanned", func() bool {
		if err := s.db.QueryRow(context.Background(), `SELECT scan, scan_signature FROM files WHERE id = $1`, fileID).Scan(&scan, &sig); err != nil {
			s.t.Fatal(err)
		}
		return scan != "pending"
	})
	return scan, sig
}

// TestWhatClamdCannotJudgeIsUnscannable: files clamd cannot judge, each hiding EICAR
// behind what stops it (a zip of zeros past its MaxScanSize and then EICAR, a
// password-protected zip of EICAR, a zip of more files than its MaxFiles and then
// EICAR), and a file over SHIPFILE_SCAN_MAX_SIZE, are recorded 'unscannable' with
// clamd's answer (or why), never 'clean': their objects kept, no package.file_infected
// and no owner e-mail, one audit entry each. EICAR
// itself, beside them, is infected. clamd's limits are small here so the archives are;
// the shipped limits are bigger and the answers the same.
func TestWhatClamdCannotJudgeIsUnscannable(t *testing.T) {
	s := newSystemWith(t, "block", "StreamMaxLength 20M\nMaxScanSize 2M\nMaxFileSize 2M\nMaxFiles 100\n")
	bomb, err := testzip.ZerosThen(3<<20, eicar)
	if err != nil {
		t.Fatal(err)
	}
	encrypted, err := testzip.Encrypted("infected", eicar)
	if err != nil {
		t.Fatal(err)
	}
	many, err := testzip.ManyFiles(101, eicar)
	if err != nil {
		t.Fatal(err)
	}
	const maxSize = 1 << 20
	big := make([]byte, maxSize+1)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	id := s.pkg("outbound")
	upload := func(name string, b []byte) string {
		return s.a.Upload("/api/v1/packages/"+id+"/files", name, b)["id"].(string)
	}
	cases := []struct{ name, file, sig string }{
		{"zeros past MaxScanSize, then EICAR", upload("report.zip", bomb), "Heuristics.Limits.Exceeded."},
		{"encrypted zip of EICAR", upload("secret.zip", encrypted), "Heuristics.Encrypted.Zip"},
		{"more files than MaxFiles, then EICAR", upload("many.zip", many), "Heuristics.Limits.Exceeded.MaxFiles"},
		{"over SHIPFILE_SCAN_MAX_SIZE", upload("big.bin", big), "SHIPFILE_SCAN_MAX_SIZE"},
	}
	infected := upload("eicar.com", eicar)
	s.finalize(id)
	s.startScanner(fmt.Sprintf("SHIPFILE_SCAN_MAX_SIZE=%d", maxSize))

	if scan, sig := s.scanOf(infected, 60*time.Second); scan != "infected" || !strings.HasPrefix(sig, "Eicar-Test-Signature") {
		t.Fatalf("EICAR itself: %s %q, want infected", scan, sig)
	}
	s.infectedOnce(infected) // its event is out: the relay has run
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			scan, sig := s.scanOf(c.file, 60*time.Second)
			if scan != "unscannable" || !strings.Contains(sig, c.sig) {
				t.Fatalf("recorded %s %q, want unscannable with %q", scan, sig, c.sig)
			}
			if !s.objectExists(s.objectKey(c.file)) {
				t.Error("the object is gone: an unscannable file is not malware; its owner may release it")
			}
			if n := s.infectedEvents(c.file); n != 0 {
				t.Errorf("%d package.file_infected events, want none", n)
			}
			if n := s.count(`SELECT count(*) FROM owner_notifications WHERE file_id = $1`, c.file); n != 0 {
				t.Errorf("%d owner notifications, want none (no malware was found)", n)
			}
			if n := s.count(`SELECT count(*) FROM audit_log WHERE action = 'file.unscannable' AND file_id = $1 AND actor = 'system'`, c.file); n != 1 {
				t.Errorf("%d audit entries, want 1", n)
			}
		})
	}
}
