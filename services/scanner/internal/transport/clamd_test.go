package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/scanner/internal/app"
	"github.com/shipfile/shipfile/services/scanner/internal/testzip"
)

func TestParseClamdAddr(t *testing.T) {
	tests := []struct {
		in, network, addr string
		ok                bool
	}{
		{"127.0.0.1:3310", "tcp", "127.0.0.1:3310", true},
		{"tcp://clamav:3310", "tcp", "clamav:3310", true},
		{"[::1]:3310", "tcp", "[::1]:3310", true},
		{"unix:/run/clamav/clamd.ctl", "unix", "/run/clamav/clamd.ctl", true},
		{"unix:///run/clamd.sock", "unix", "/run/clamd.sock", true},
		{"/run/clamd.sock", "unix", "/run/clamd.sock", true},
		{"clamav", "", "", false},
		{"", "", "", false},
		{"tcp://", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			n, a, err := ParseClamdAddr(tt.in)
			if (err == nil) != tt.ok || n != tt.network || a != tt.addr {
				t.Errorf("ParseClamdAddr(%q) = %q %q %v", tt.in, n, a, err)
			}
		})
	}
}

func TestParseReply(t *testing.T) {
	tests := []struct {
		name, reply, sig string
		failed           bool
	}{
		{"clean", "stream: OK", "", false},
		{"found", "stream: Eicar-Test-Signature.UNOFFICIAL FOUND", "Eicar-Test-Signature.UNOFFICIAL", false},
		{"official name", "stream: Win.Test.EICAR_HDB-1 FOUND", "Win.Test.EICAR_HDB-1", false},
		{"heuristics are names too", "stream: Heuristics.Limits.Exceeded.MaxFiles FOUND", "Heuristics.Limits.Exceeded.MaxFiles", false},
		{"garbage", "what?", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sig, err := parseReply(tt.reply)
			var sf *app.ScanFailedError
			if sig != tt.sig || errors.As(err, &sf) != tt.failed || (err != nil && !tt.failed) {
				t.Errorf("parseReply(%q) = %q, %v", tt.reply, sig, err)
			}
		})
	}
	// A stream over clamd's StreamMaxLength was not judged: unscannable, not an error
	// to try again.
	var ue *app.UnscannableError
	if _, err := parseReply("INSTREAM size limit exceeded. ERROR"); !errors.As(err, &ue) || !strings.Contains(ue.Reason, "size limit") {
		t.Errorf("size limit: %v, want an UnscannableError", err)
	}
}

// TestClamdAnswersForWhatItCannotJudge hands the clamd of make test (its shipped
// configuration: scripts/dev.sh) an encrypted zip of EICAR and a zip of more files than
// its MaxFiles with EICAR last: it names each (Heuristics.*), and Judge records them
// 'unscannable'. A clamd without the Alert* options answers OK: 'clean'.
func TestClamdAnswersForWhatItCannotJudge(t *testing.T) {
	addr := os.Getenv("SHIPFILE_TEST_CLAMD_ADDR")
	if addr == "" {
		t.Fatal("SHIPFILE_TEST_CLAMD_ADDR is not set: run the tests through make test (scripts/dev.sh starts clamd)")
	}
	c, err := NewClamd(ClamdConfig{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	encrypted, err := testzip.Encrypted("infected", eicar)
	if err != nil {
		t.Fatal(err)
	}
	many, err := testzip.ManyFiles(10001, eicar) // clamd's default MaxFiles is 10000
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, prefix string
		zip          []byte
	}{
		{"encrypted", "Heuristics.Encrypted.Zip", encrypted},
		{"too many files", "Heuristics.Limits.Exceeded.MaxFiles", many},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sig, err := c.Scan(context.Background(), bytes.NewReader(tt.zip))
			if err != nil {
				t.Fatal(err)
			}
			if got := app.Judge(sig); got != app.ScanUnscannable || !strings.HasPrefix(sig, tt.prefix) {
				t.Errorf("clamd answered %q: %s, want %s… and unscannable", sig, got, tt.prefix)
			}
		})
	}
}

// eicar is the EICAR test file, assembled so that no file of the repository holds it.
var eicar = []byte(`X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR` + `-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`)

// TestScanWithClamd streams to the clamd of make test in tiny chunks, so the EICAR
// string spans chunk boundaries: found; clean bytes: clean; a closed port: unavailable.
func TestScanWithClamd(t *testing.T) {
	addr := os.Getenv("SHIPFILE_TEST_CLAMD_ADDR")
	if addr == "" {
		t.Fatal("SHIPFILE_TEST_CLAMD_ADDR is not set: run the tests through make test (scripts/dev.sh starts clamd)")
	}
	c, err := NewClamd(ClamdConfig{Addr: addr, ChunkSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	infected := append(append(bytes.Repeat([]byte("a"), 1000), eicar...), bytes.Repeat([]byte("b"), 1000)...)
	if sig, err := c.Scan(ctx, bytes.NewReader(infected)); err != nil || sig == "" {
		t.Errorf("EICAR: %q, %v", sig, err)
	}
	if sig, err := c.Scan(ctx, bytes.NewReader(bytes.Repeat([]byte("clean "), 5000))); err != nil || sig != "" {
		t.Errorf("clean: %q, %v", sig, err)
	}
	if sig, err := c.Scan(ctx, bytes.NewReader(nil)); err != nil || sig != "" {
		t.Errorf("empty: %q, %v", sig, err)
	}
	down, _ := NewClamd(ClamdConfig{Addr: servicetest.FreeAddr(t)})
	if _, err := down.Scan(ctx, bytes.NewReader(eicar)); !errors.Is(err, app.ErrClamdUnavailable) {
		t.Errorf("nothing listening: %v, want ErrClamdUnavailable", err)
	}
	if err := down.Ping(ctx); !errors.Is(err, app.ErrClamdUnavailable) {
		t.Errorf("ping nothing: %v", err)
	}
}

// patternReader yields n bytes of a repeating clean text without allocating: the file
// being scanned is never in the test's memory either.
type patternReader struct{ n, off int64 }

var pattern = []byte("shipfile scanner memory test, nothing to find here.\n")

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n-r.off)]
	for i := range p {
		p[i] = pattern[(r.off+int64(i))%int64(len(pattern))]
	}
	r.off += int64(len(p))
	return len(p), nil
}

// TestScanMemoryFlat streams 4 MiB and then 64 MiB to the clamd of make test and
// counts the bytes the client allocates for each (runtime.MemStats.TotalAlloc): a few
// chunk buffers at most, and no more for the file 16 times as big (never a whole
// file in memory: docs/CONFIGURATION.md, SHIPFILE_SCAN_CHUNK_SIZE).
func TestScanMemoryFlat(t *testing.T) {
	addr := os.Getenv("SHIPFILE_TEST_CLAMD_ADDR")
	if addr == "" {
		t.Fatal("SHIPFILE_TEST_CLAMD_ADDR is not set: run the tests through make test (scripts/dev.sh starts clamd)")
	}
	const chunk = 256 << 10
	c, err := NewClamd(ClamdConfig{Addr: addr, ChunkSize: chunk})
	if err != nil {
		t.Fatal(err)
	}
	allocated := func(size int64) uint64 {
		t.Helper()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		sig, err := c.Scan(context.Background(), &patternReader{n: size})
		runtime.ReadMemStats(&after)
		if err != nil || sig != "" {
			t.Fatalf("scan of %d bytes: %q, %v", size, sig, err)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	small, big := allocated(4<<20), allocated(64<<20)
	t.Logf("allocated: %d bytes scanning 4 MiB, %d bytes scanning 64 MiB", small, big)
	// Two chunk buffers (from the pool, or new ones after the GC emptied it), plus small
	// change: a connection, a goroutine, a closure per chunk.
	const bound = 2*(chunk+4) + 256<<10
	for _, a := range []uint64{small, big} {
		if a > bound {
			t.Errorf("a scan allocated %d bytes, want at most %d (two chunks and change)", a, bound)
		}
	}
	if big > small+128<<10 {
		t.Errorf("scanning 64 MiB allocated %d bytes, 4 MiB %d: memory grows with the file", big, small)
	}
}

// TestNoVerdictInTimeIsUnscannable gives clamd of make test less time to judge a large
// stream than it needs: clamd still answers PING, so the file is unscannable, not clamd
// being down (which would keep the file pending for ever).
func TestNoVerdictInTimeIsUnscannable(t *testing.T) {
	addr := os.Getenv("SHIPFILE_TEST_CLAMD_ADDR")
	if addr == "" {
		t.Fatal("SHIPFILE_TEST_CLAMD_ADDR is not set: run the tests through make test (scripts/dev.sh starts clamd)")
	}
	c, err := NewClamd(ClamdConfig{Addr: addr, Timeout: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Scan(context.Background(), &patternReader{n: 160 << 20})
	var ue *app.UnscannableError
	if !errors.As(err, &ue) || errors.Is(err, app.ErrClamdUnavailable) {
		t.Fatalf("scan with too little time: %v, want an UnscannableError", err)
	}
	if !strings.Contains(ue.Reason, "no verdict") {
		t.Errorf("reason %q", ue.Reason)
	}
}
