// Command webhooks fans package events out to webhook subscriptions and delivers signed
// POSTs with retries, keeping a delivery log. Several instances share durable consumers.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/service"
)

// Config is the webhook dispatcher's configuration.
type Config struct {
	Addr            string `env:"SHIPFILE_WEBHOOKS_ADDR" default:"127.0.0.1:8083" help:"address of /healthz, /readyz and /metrics"`
	Database        database.Config
	NATS            bus.Config
	AllowPrivate    bool            `env:"SHIPFILE_WEBHOOK_ALLOW_PRIVATE" default:"false" help:"allow deliveries to loopback, private and link-local addresses"`
	RetrySchedule   []time.Duration `env:"SHIPFILE_WEBHOOK_RETRY_SCHEDULE" default:"10s,1m,5m,30m,2h,6h,12h" help:"waits between delivery attempts"`
	Timeout         time.Duration   `env:"SHIPFILE_WEBHOOK_TIMEOUT" default:"10s" help:"time a receiver has to answer"`
	ShutdownTimeout time.Duration   `env:"SHIPFILE_SHUTDOWN_TIMEOUT" default:"20s" help:"grace period for in-flight work on SIGTERM"`
}

func main() { service.Main("webhooks", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := config.Parse("webhooks", args, os.Stdout, &cfg); err != nil {
		return err
	}
	log.Info("starting", "config", config.LogValue(&cfg))

	pool, err := database.Open(ctx, cfg.Database.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := bus.Connect(ctx, cfg.NATS.URL, "shipfile-webhooks")
	if err != nil {
		return err
	}
	defer nc.Close()

	handler := ops.Handler(ops.NewRegistry(),
		ops.Check{Name: "postgres", Fn: pool.Ping},
		ops.Check{Name: "nats", Fn: nc.Check},
	)
	err = ops.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout)
	log.Info("stopped")
	return err
}
