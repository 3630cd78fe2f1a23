package service_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/pkg/storage"
)

// infra is the shared PostgreSQL, NATS and MinIO of `make test` (scripts/dev.sh).
type infra struct {
	Database database.Config
	NATS     bus.Config
	S3       storage.Config
}

// TestOpen opens each combination a binary asks for against the real servers: only
// what was asked is open, its checks pass, and Close closes it.
func TestOpen(t *testing.T) {
	var cfg infra
	if err := config.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	if u := os.Getenv("SHIPFILE_TEST_DATABASE_URL"); u != "" {
		cfg.Database.URL = u
	}
	tests := []struct {
		name       string
		want       service.Connections
		wantChecks []string
	}{
		{"postgres only (shipctl)", service.Connections{Database: &cfg.Database, MinConns: 7}, []string{"postgres"}},
		{"postgres and nats (mailer, webhooks)", service.Connections{Database: &cfg.Database, NATS: &cfg.NATS}, []string{"postgres", "nats"}},
		{"all three", service.Connections{Database: &cfg.Database, NATS: &cfg.NATS, S3: &cfg.S3}, []string{"postgres", "nats", "s3", "extra"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			conns, err := service.Open(ctx, "servicetest", tt.want)
			if err != nil {
				t.Fatal(err)
			}
			defer conns.Close()
			if (conns.Bus != nil) != (tt.want.NATS != nil) || (conns.Objects != nil) != (tt.want.S3 != nil) || conns.Pool == nil {
				t.Fatalf("open = %+v, want what %+v asks for", conns, tt.want)
			}
			if tt.want.MinConns > 0 && conns.Pool.Config().MaxConns < int32(tt.want.MinConns) {
				t.Errorf("MaxConns = %d, want at least %d", conns.Pool.Config().MaxConns, tt.want.MinConns)
			}
			var extra []ops.Check
			if slices.Contains(tt.wantChecks, "extra") {
				extra = append(extra, ops.Check{Name: "extra", Fn: func(context.Context) error { return nil }})
			}
			var names []string
			for _, c := range conns.Checks(extra...) {
				names = append(names, c.Name)
				if err := c.Fn(ctx); err != nil {
					t.Errorf("check %s: %v", c.Name, err)
				}
			}
			if !slices.Equal(names, tt.wantChecks) {
				t.Errorf("checks = %v, want %v", names, tt.wantChecks)
			}
		})
	}
}

// TestOpenFails: an unreachable server is an error, and what was opened before it is
// closed again.
func TestOpenFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bad := database.Config{URL: "postgres://127.0.0.1:1/x?connect_timeout=1"}
	if _, err := service.Open(ctx, "servicetest", service.Connections{Database: &bad}); err == nil {
		t.Fatal("Open of an unreachable PostgreSQL succeeded")
	}
}
