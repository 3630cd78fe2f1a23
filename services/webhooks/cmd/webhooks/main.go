// Command webhooks fans package events out to webhook subscriptions and delivers signed
// POSTs with retries, keeping a delivery log. Several instances share durable consumers.
package main

import (
	"context"
	"log/slog"

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

	conns, err := service.Open(ctx, "webhooks", service.Connections{Database: &cfg.Database, NATS: &cfg.NATS})
	if err != nil {
		return err
	}
	defer conns.Close()
	svc, err := webhooks.New(ctx, cfg, webhooks.Deps{
		Pool: conns.Pool, JS: conns.Bus.JS, Registry: ops.NewRegistry(), Log: log, Options: dispatchOptions(),
	})
	if err != nil {
		return err
	}

	handler := ops.Handler(svc.Registry, conns.Checks()...)
	return service.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout, svc.Run)
}
