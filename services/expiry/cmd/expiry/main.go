// Command expiry finds packages whose time is up, expires them, deletes their objects
// and emits package.expired. Several instances may run; row locks keep them apart.
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
	"github.com/shipfile/shipfile/pkg/storage"
)

// Config is the expiry service's configuration.
type Config struct {
	Addr            string `env:"SHIPFILE_EXPIRY_ADDR" default:"127.0.0.1:8082" help:"address of /healthz, /readyz and /metrics"`
	Database        database.Config
	NATS            bus.Config
	S3              storage.Config
	Interval        time.Duration `env:"SHIPFILE_EXPIRY_INTERVAL" default:"1m" help:"how often to look for packages whose time is up"`
	ShutdownTimeout time.Duration `env:"SHIPFILE_SHUTDOWN_TIMEOUT" default:"20s" help:"grace period for in-flight work on SIGTERM"`
}

func main() { service.Main("expiry", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := config.Parse("expiry", args, os.Stdout, &cfg); err != nil {
		return err
	}
	log.Info("starting", "config", config.LogValue(&cfg))

	pool, err := database.Open(ctx, cfg.Database.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := bus.Connect(ctx, cfg.NATS.URL, "shipfile-expiry")
	if err != nil {
		return err
	}
	defer nc.Close()
	objects, err := storage.Open(ctx, cfg.S3)
	if err != nil {
		return err
	}

	handler := ops.Handler(ops.NewRegistry(),
		ops.Check{Name: "postgres", Fn: pool.Ping},
		ops.Check{Name: "nats", Fn: nc.Check},
		ops.Check{Name: "s3", Fn: objects.Check},
	)
	err = ops.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout)
	log.Info("stopped")
	return err
}
