// Command expiry finds packages whose time is up, expires them, deletes their objects
// and emits package.expired. Several instances may run; row locks keep them apart.
package main

import (
	"context"
	"log/slog"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/pkg/storage"
	expiry "github.com/shipfile/shipfile/services/expiry/internal/service"
)

// Config is the expiry service's configuration.
type Config = expiry.Config

func main() { service.Main("expiry", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := service.Load("expiry", args, log, &cfg); err != nil {
		return err
	}

	pool, err := database.Open(ctx, cfg.Database.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := events.Connect(ctx, cfg.NATS, "shipfile-expiry")
	if err != nil {
		return err
	}
	defer nc.Close()
	objects, err := storage.Open(ctx, cfg.S3)
	if err != nil {
		return err
	}
	svc, err := expiry.New(ctx, cfg, expiry.Deps{Pool: pool, Objects: objects, JS: nc.JS, Registry: ops.NewRegistry(), Log: log})
	if err != nil {
		return err
	}

	handler := ops.Handler(svc.Registry,
		ops.Check{Name: "postgres", Fn: pool.Ping},
		ops.Check{Name: "nats", Fn: nc.Check},
		ops.Check{Name: "s3", Fn: objects.Check},
	)
	// The expirer stops when ctx is cancelled (or the ops server fails); the relay
	// after it, publishing what the last batch wrote.
	return service.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout, svc.Run)
}
