package main

import (
	"bytes"
	"log/slog"
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
	t.Setenv("SHIPFILE_SECRET_KEY", servicetest.SecretKey)
	// /readyz, /healthz and /metrics are on the ops address.
	servicetest.Lifecycle(t, run, opsAddr)
}

// TestRefusesToStartWithoutSecretKey: without SHIPFILE_SECRET_KEY (or with a key that is
// not base64 of 32 bytes) the gateway stops at once with an error that names the
// variable and does not show the value.
func TestRefusesToStartWithoutSecretKey(t *testing.T) {
	for name, c := range map[string]struct{ key, want string }{
		"unset":      {"", "SHIPFILE_SECRET_KEY is not set"},
		"too short":  {"c2hvcnQ=", "SHIPFILE_SECRET_KEY: the key is 5 bytes"},
		"not base64": {"not-a-key!!", "SHIPFILE_SECRET_KEY: the key is not base64"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("SHIPFILE_SECRET_KEY", c.key)
			t.Setenv("SHIPFILE_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none") // never reached
			err := run(t.Context(), slog.New(slog.DiscardHandler), nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run = %v, want an error containing %q", err, c.want)
			}
			if c.key != "" && strings.Contains(err.Error(), c.key) {
				t.Fatalf("the error shows the key: %v", err)
			}
		})
	}
}

func TestUsageListsEveryVariable(t *testing.T) {
	var buf bytes.Buffer
	config.Usage(&buf, "gateway", &Config{})
	for _, v := range []string{"SHIPFILE_HTTP_ADDR", "SHIPFILE_PUBLIC_URL", "SHIPFILE_DATABASE_URL", "SHIPFILE_NATS_URL",
		"SHIPFILE_S3_ENDPOINT", "SHIPFILE_S3_ACCESS_KEY", "SHIPFILE_S3_SECRET_KEY", "SHIPFILE_S3_BUCKET", "SHIPFILE_S3_USE_SSL",
		"SHIPFILE_WEBHOOK_ALLOW_PRIVATE", "SHIPFILE_SECRET_KEY", "SHIPFILE_SECRET_KEY_PREVIOUS",
		"SHIPFILE_OPS_ADDR", "SHIPFILE_HASH_CONCURRENCY", "SHIPFILE_UPLOAD_MAX_CONCURRENT", "SHIPFILE_UPLOAD_MIN_RATE",
		"SHIPFILE_UPLOAD_RATE_WINDOW", "SHIPFILE_HTTP_IDLE_TIMEOUT", "SHIPFILE_LINK_RATE", "SHIPFILE_LINK_BURST",
		"SHIPFILE_LOGIN_RATE", "SHIPFILE_LOGIN_BURST", "SHIPFILE_HTTP_BODY_TIMEOUT"} {
		if !strings.Contains(buf.String(), v) {
			t.Errorf("--help lacks %s", v)
		}
	}
}
