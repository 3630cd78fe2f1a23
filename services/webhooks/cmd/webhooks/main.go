// Command webhooks fans package events out to webhook subscriptions and delivers signed
// POSTs with retries, keeping a delivery log. Several instances share durable consumers.
package main

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"

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

// gcPercent is the dispatcher's GOGC when the environment sets none. Its live heap is
// small (subscriptions, the batches under way, connections) and nearly everything else
// it allocates lives for one delivery, so at Go's default of 100 the collector runs
// often; 400 takes less CPU per delivery (docs/BENCHMARKS.md, "Dispatcher, issue 21,
// fourth pass": the collector), for a heap that may grow to five times the live one
// instead of twice. GOGC (and GOMEMLIMIT) in the environment win.
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	service.Main("webhooks", run)
}

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
