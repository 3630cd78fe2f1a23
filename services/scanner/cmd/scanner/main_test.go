package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestLifecycle runs the scanner against the clamd of make test (scripts/dev.sh starts
// it and writes SHIPFILE_TEST_CLAMD_ADDR): ready once PostgreSQL, NATS, S3 and clamd
// answer, clean stop on SIGTERM.
func TestLifecycle(t *testing.T) {
	clamd := os.Getenv("SHIPFILE_TEST_CLAMD_ADDR")
	if clamd == "" {
		t.Fatal("SHIPFILE_TEST_CLAMD_ADDR is not set: run the tests through make test or scripts/dev.sh exec after scripts/dev.sh clamd")
	}
	addr := servicetest.FreeAddr(t)
	t.Setenv("SHIPFILE_SCANNER_ADDR", addr)
	t.Setenv("SHIPFILE_CLAMD_ADDR", clamd)
	t.Setenv("SHIPFILE_DATABASE_URL", schematest.New(t))
	servicetest.Lifecycle(t, run, addr)
}

func TestUsageListsEveryVariable(t *testing.T) {
	var buf bytes.Buffer
	config.Usage(&buf, "scanner", &Config{})
	for _, v := range []string{"SHIPFILE_SCANNER_ADDR", "SHIPFILE_DATABASE_URL", "SHIPFILE_NATS_URL", "SHIPFILE_S3_ENDPOINT",
		"SHIPFILE_CLAMD_ADDR", "SHIPFILE_SCAN_WORKERS", "SHIPFILE_SCAN_PACKAGE_SHARE", "SHIPFILE_SCAN_MAX_SIZE", "SHIPFILE_SCAN_CHUNK_SIZE",
		"SHIPFILE_QUARANTINE_BUCKET", "SHIPFILE_SCAN_ACK_WAIT", "SHIPFILE_SHUTDOWN_TIMEOUT"} {
		if !strings.Contains(buf.String(), v) {
			t.Errorf("--help lacks %s", v)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		c := Config{ClamdAddr: "127.0.0.1:3310", Workers: 4, MaxSize: 1 << 30, ChunkSize: 256 << 10, ClamdTimeout: time.Minute,
			MaxAttempts: 5, RetryMax: 30 * time.Second, AckWait: 30 * time.Second}
		c.NATS.StreamReplicas = 1
		return c
	}
	c := base()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, mod := range map[string]func(*Config){
		"no clamd address":   func(c *Config) { c.ClamdAddr = "" },
		"clamd without port": func(c *Config) { c.ClamdAddr = "clamav" },
		"no workers":         func(c *Config) { c.Workers = 0 },
		"tiny chunk":         func(c *Config) { c.ChunkSize = 10 },
		"huge chunk":         func(c *Config) { c.ChunkSize = 1 << 30 },
		"no attempts":        func(c *Config) { c.MaxAttempts = 0 },
		"negative max size":  func(c *Config) { c.MaxSize = -1 },
		"short ack wait":     func(c *Config) { c.AckWait = time.Millisecond },
		"no retry wait":      func(c *Config) { c.RetryMax = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			c := base()
			mod(&c)
			if err := c.Validate(); err == nil {
				t.Error("accepted")
			}
		})
	}
}
