// Command gateway serves shipfile's REST API, docs, web pages and recipient links.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/httpapi"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// Config is the gateway's configuration.
type Config struct {
	HTTPAddr        string `env:"SHIPFILE_HTTP_ADDR" default:"127.0.0.1:8080" help:"address the API listens on"`
	PublicURL       string `env:"SHIPFILE_PUBLIC_URL" default:"http://127.0.0.1:8080" help:"public base URL (magic links)"`
	Database        database.Config
	NATS            bus.Config
	S3              storage.Config
	MaxJSONBytes    int64         `env:"SHIPFILE_MAX_JSON_BYTES" default:"1048576" help:"largest accepted JSON request body"`
	RateLimit       int           `env:"SHIPFILE_RATE_LIMIT" default:"50" help:"requests per second per API token (0 disables)"`
	RateBurst       int           `env:"SHIPFILE_RATE_BURST" default:"100" help:"burst of requests per API token"`
	TrustedProxies  string        `env:"SHIPFILE_TRUSTED_PROXIES" default:"" help:"comma-separated proxy CIDRs whose X-Forwarded-For is trusted"`
	ShutdownTimeout time.Duration `env:"SHIPFILE_SHUTDOWN_TIMEOUT" default:"20s" help:"grace period for in-flight requests on SIGTERM"`
}

func main() { service.Main("gateway", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := config.Parse("gateway", args, os.Stdout, &cfg); err != nil {
		return err
	}
	log.Info("starting", "config", config.LogValue(&cfg))

	if err := migrations.Up(ctx, cfg.Database.URL); err != nil {
		return err
	}
	pool, err := database.Open(ctx, cfg.Database.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := bus.Connect(ctx, cfg.NATS.URL, "shipfile-gateway")
	if err != nil {
		return err
	}
	defer nc.Close()
	objects, err := storage.Open(ctx, cfg.S3)
	if err != nil {
		return err
	}

	identity := app.NewIdentity(store.NewPostgres(pool))
	reg := ops.NewRegistry()
	router, err := httpapi.New(httpapi.Deps{
		Log:      log,
		Identity: identity,
		Registry: reg,
		Checks: []ops.Check{
			{Name: "postgres", Fn: pool.Ping},
			{Name: "nats", Fn: nc.Check},
			{Name: "s3", Fn: objects.Check},
		},
		Config: httpapi.Config{
			MaxJSONBytes:   cfg.MaxJSONBytes,
			RatePerSecond:  float64(cfg.RateLimit),
			RateBurst:      cfg.RateBurst,
			TrustedProxies: splitList(cfg.TrustedProxies),
		},
	})
	if err != nil {
		return fmt.Errorf("router: %w", err)
	}
	err = ops.Serve(ctx, log, cfg.HTTPAddr, router, cfg.ShutdownTimeout)
	log.Info("stopped")
	return err
}

func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
