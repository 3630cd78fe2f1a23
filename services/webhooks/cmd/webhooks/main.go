// Command webhooks fans package events out to webhook subscriptions and delivers signed
// POSTs with retries, keeping a delivery log. Several instances share durable consumers.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/shipfile/shipfile/pkg/config"
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
	if err := config.Parse("webhooks", args, os.Stdout, &cfg); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if _, err := cfg.Secrets.Keyring(); err != nil {
		return err
	}
	log.Info("starting", "config", config.LogValue(&cfg))

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

	// Either part failing stops the other; a stop signal stops both.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dispatchErr := make(chan error, 1)
	go func() {
		err := svc.Run(ctx)
		cancel()
		dispatchErr <- err
	}()
	handler := ops.Handler(svc.Registry,
		ops.Check{Name: "postgres", Fn: pool.Ping},
		ops.Check{Name: "nats", Fn: nc.Check},
	)
	serveErr := ops.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout)
	cancel()
	err = errors.Join(<-dispatchErr, serveErr)
	log.Info("stopped")
	return err
}
