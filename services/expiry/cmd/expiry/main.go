// Command expiry finds packages whose time is up, expires them, deletes their objects
// and emits package.expired. Several instances may run; row locks keep them apart.
package main

import (
	"context"
	"log/slog"

	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/service"
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

	conns, err := service.Open(ctx, "expiry", service.Connections{Database: &cfg.Database, NATS: &cfg.NATS, S3: &cfg.S3})
	if err != nil {
		return err
	}
	defer conns.Close()
	svc, err := expiry.New(ctx, cfg, expiry.Deps{Pool: conns.Pool, Objects: conns.Objects, JS: conns.Bus.JS, Registry: ops.NewRegistry(), Log: log})
	if err != nil {
		return err
	}

	handler := ops.Handler(svc.Registry, conns.Checks()...)
	// The expirer stops when ctx is cancelled (or the ops server fails); the relay
	// after it, publishing what the last batch wrote.
	return service.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout, svc.Run)
}
