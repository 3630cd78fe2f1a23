package e2e

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestOnePackageDoesNotHoldTheOthers: a request link's backlog of files, all uploaded
// before one file of another package, does not keep that file pending until the
// backlog is scanned: it gets its verdict while most of the backlog still waits.
// Scanned in the order they came, it would come last.
func TestOnePackageDoesNotHoldTheOthers(t *testing.T) {
	s := newSystem(t, "block")
	const backlog, workers = 16, 2
	flood := s.pkg("outbound")
	for i := range backlog {
		b := make([]byte, 1<<20) // random: clamd reads every byte
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		s.a.Upload("/api/v1/packages/"+flood+"/files", fmt.Sprintf("part%02d.bin", i), b)
	}
	other := s.pkg("outbound")
	single := s.a.Upload("/api/v1/packages/"+other+"/files", "notes.txt", []byte("a file of its own"))["id"].(string)

	s.startScanner(fmt.Sprintf("SHIPFILE_SCAN_WORKERS=%d", workers))
	if scan, _ := s.scanOf(single, 60*time.Second); scan != "clean" {
		t.Fatalf("the other package's file: %s, want clean", scan)
	}
	servicetest.WaitFor(t, 120*time.Second, "the backlog scanned", func() bool {
		return s.count(`SELECT count(*) FROM files WHERE package_id = $1 AND scan = 'pending'`, flood) == 0
	})
	after := s.count(`SELECT count(*) FROM files WHERE package_id = $1 AND scanned_at > (SELECT scanned_at FROM files WHERE id = $2)`, flood, single)
	t.Logf("%d of the backlog's %d files were scanned after the other package's file", after, backlog)
	if after < 2*workers {
		t.Errorf("%d of the backlog's %d files scanned after the other package's file, want at least %d: it waited for the backlog", after, backlog, 2*workers)
	}
	if n := s.count(`SELECT count(*) FROM files WHERE package_id = $1 AND scan <> 'clean'`, flood); n != 0 {
		t.Errorf("%d of the backlog's files are not clean", n)
	}
}
