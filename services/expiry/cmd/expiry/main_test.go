package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

func TestLifecycle(t *testing.T) {
	addr := servicetest.FreeAddr(t)
	t.Setenv("SHIPFILE_EXPIRY_ADDR", addr)
	t.Setenv("SHIPFILE_DATABASE_URL", pgtest.AdminURL())
	servicetest.Lifecycle(t, run, addr)
}

func TestUsageListsEveryVariable(t *testing.T) {
	var buf bytes.Buffer
	config.Usage(&buf, "expiry", &Config{})
	for _, v := range []string{"SHIPFILE_EXPIRY_ADDR", "SHIPFILE_DATABASE_URL", "SHIPFILE_NATS_URL", "SHIPFILE_S3_ENDPOINT", "SHIPFILE_EXPIRY_INTERVAL"} {
		if !strings.Contains(buf.String(), v) {
			t.Errorf("--help lacks %s", v)
		}
	}
}
