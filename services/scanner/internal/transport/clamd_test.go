package transport

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/scanner/internal/app"
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
		{"size limit", "INSTREAM size limit exceeded. ERROR", "", true},
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
