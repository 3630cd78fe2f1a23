package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// TestLifecycle starts the gateway against the real PostgreSQL, NATS and MinIO, waits
// until it is ready and stops it as SIGTERM would.
func TestLifecycle(t *testing.T) {
	addr, opsAddr := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	t.Setenv("SHIPFILE_HTTP_ADDR", addr)
	t.Setenv("SHIPFILE_OPS_ADDR", opsAddr)
	t.Setenv("SHIPFILE_DATABASE_URL", pgtest.New(t, migrations.Version(), migrations.Up))
	// /readyz, /healthz and /metrics are on the ops address.
	servicetest.Lifecycle(t, run, opsAddr)
}

func TestUsageListsEveryVariable(t *testing.T) {
	var buf bytes.Buffer
	config.Usage(&buf, "gateway", &Config{})
	for _, v := range []string{"SHIPFILE_HTTP_ADDR", "SHIPFILE_PUBLIC_URL", "SHIPFILE_DATABASE_URL", "SHIPFILE_NATS_URL",
		"SHIPFILE_S3_ENDPOINT", "SHIPFILE_S3_ACCESS_KEY", "SHIPFILE_S3_SECRET_KEY", "SHIPFILE_S3_BUCKET", "SHIPFILE_S3_USE_SSL",
		"SHIPFILE_WEBHOOK_ALLOW_PRIVATE", "SHIPFILE_OPS_ADDR", "SHIPFILE_HASH_CONCURRENCY", "SHIPFILE_UPLOAD_MAX_CONCURRENT",
		"SHIPFILE_UPLOAD_MIN_RATE", "SHIPFILE_UPLOAD_RATE_WINDOW", "SHIPFILE_HTTP_IDLE_TIMEOUT", "SHIPFILE_LINK_RATE", "SHIPFILE_LINK_BURST"} {
		if !strings.Contains(buf.String(), v) {
			t.Errorf("--help lacks %s", v)
		}
	}
}
