// Command webhooks fans package events out to webhook subscriptions and delivers signed
// POSTs with retries, keeping a delivery log. Several instances share durable consumers.
package main

import (
	"context"
	"log/slog"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/service"
	webhooks "github.com/shipfile/shipfile/services/webhooks/internal/service"
	"github.com/shipfile/shipfile/services/webhooks/internal/transport"
)

// Config is the webhook dispatcher's configuration.
type Config = webhooks.Config

// dispatchOptions gives the names of the streams, subjects and consumers; this
// package's tests replace it to run on streams of their own.
var dispatchOptions = transport.DefaultOptions

func main() { service.Main("webhooks", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := service.Load("webhooks", args, log, &cfg); err != nil {
		return err
	}
	if _, err := cfg.Secrets.Keyring(); err != nil {
		return err
	}

	pool, err := database.Open(ctx, cfg.Database.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := events.Connect(ctx, cfg.NATS, "shipfile-webhooks")
	if err != nil {
		return err
	}
	defer nc.Close()
	svc, err := webhooks.New(ctx, cfg, webhooks.Deps{
		Pool: pool, JS: nc.JS, Registry: ops.NewRegistry(), Log: log, Options: dispatchOptions(),
	})
	if err != nil {
		return err
	}

	handler := ops.Handler(svc.Registry,
		ops.Check{Name: "postgres", Fn: pool.Ping},
		ops.Check{Name: "nats", Fn: nc.Check},
	)
	return service.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout, svc.Run)
}
