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
	t.Setenv("SHIPFILE_WEBHOOKS_ADDR", addr)
	t.Setenv("SHIPFILE_DATABASE_URL", pgtest.AdminURL())
	servicetest.Lifecycle(t, run, addr)
}

func TestUsageListsEveryVariable(t *testing.T) {
	var buf bytes.Buffer
	config.Usage(&buf, "webhooks", &Config{})
	for _, v := range []string{"SHIPFILE_WEBHOOKS_ADDR", "SHIPFILE_DATABASE_URL", "SHIPFILE_NATS_URL",
		"SHIPFILE_WEBHOOK_ALLOW_PRIVATE", "SHIPFILE_WEBHOOK_RETRY_SCHEDULE", "SHIPFILE_WEBHOOK_TIMEOUT"} {
		if !strings.Contains(buf.String(), v) {
			t.Errorf("--help lacks %s", v)
		}
	}
}
