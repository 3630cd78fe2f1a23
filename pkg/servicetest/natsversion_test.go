package servicetest

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNATSVersionAtLeast: a nats-server older than 2.10 is passed over (its consumers
// take one filter subject), as is a binary that prints no version.
func TestNATSVersionAtLeast(t *testing.T) {
	cases := []struct {
		prints string
		ok     bool
	}{
		{"nats-server: v2.9.10", false},
		{"nats-server: v2.10.0", true},
		{"nats-server: v2.12.3", true},
		{"nats-server: v3.0.1", true},
		{"something else", false},
	}
	for _, c := range cases {
		bin := filepath.Join(t.TempDir(), "nats-server")
		if err := os.WriteFile(bin, []byte("#!/bin/sh\necho '"+c.prints+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, ok := natsVersionAtLeast(bin, MinNATSVersion); ok != c.ok {
			t.Errorf("%q: at least 2.10 = %v, want %v", c.prints, ok, c.ok)
		}
	}
}
