package main

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

func TestLifecycle(t *testing.T) {
	addr := servicetest.FreeAddr(t)
	t.Setenv("SHIPFILE_EXPIRY_ADDR", addr)
	t.Setenv("SHIPFILE_DATABASE_URL", schematest.New(t))
	// A bucket of its own: the service sweeps stale uploads of the bucket it is given.
	t.Setenv("SHIPFILE_S3_BUCKET", "expiry-lifecycle-"+strings.ToLower(rand.Text()[:10]))
	t.Setenv("SHIPFILE_EXPIRY_INTERVAL", "100ms")
	servicetest.Lifecycle(t, run, addr)
}

func TestUsageListsEveryVariable(t *testing.T) {
	var buf bytes.Buffer
	config.Usage(&buf, "expiry", &Config{})
	for _, v := range []string{"SHIPFILE_EXPIRY_ADDR", "SHIPFILE_DATABASE_URL", "SHIPFILE_NATS_URL", "SHIPFILE_S3_ENDPOINT",
		"SHIPFILE_EXPIRY_INTERVAL", "SHIPFILE_EXPIRY_BATCH_SIZE", "SHIPFILE_EXPIRY_STALE_UPLOAD_AGE", "SHIPFILE_SHUTDOWN_TIMEOUT"} {
		if !strings.Contains(buf.String(), v) {
			t.Errorf("--help lacks %s", v)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		c := Config{Interval: time.Minute, BatchSize: 500, StaleUploadAge: 24 * time.Hour, OrphanGrace: time.Hour}
		c.NATS.StreamReplicas = 1
		return c
	}
	c := base()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	c.StaleUploadAge = 0
	if err := c.Validate(); err != nil {
		t.Fatalf("stale upload sweep off: %v", err)
	}
	for name, mod := range map[string]func(*Config){
		"no interval":         func(c *Config) { c.Interval = 0 },
		"zero batch":          func(c *Config) { c.BatchSize = 0 },
		"huge batch":          func(c *Config) { c.BatchSize = 100000 },
		"negative upload age": func(c *Config) { c.StaleUploadAge = -time.Hour },
		"no stream replicas":  func(c *Config) { c.NATS.StreamReplicas = 0 },
		"short orphan grace":  func(c *Config) { c.OrphanGrace = 5 * time.Minute },
		"no orphan grace":     func(c *Config) { c.OrphanGrace = 0 },
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
