// Command gateway serves shipfile's REST API, docs, web pages and recipient links.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/service"
	gateway "github.com/shipfile/shipfile/services/gateway/internal/service"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/httpapi"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// Config is the gateway's configuration.
type Config = gateway.Config

func main() { service.Main("gateway", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := service.Load("gateway", args, log, &cfg); err != nil {
		return err
	}
	if _, err := cfg.Secrets.Keyring(); err != nil {
		return err
	}

	if err := migrations.Up(ctx, cfg.Database.URL); err != nil {
		return err
	}
	conns, err := service.Open(ctx, "gateway", service.Connections{Database: &cfg.Database, MinConns: cfg.DatabaseConns, NATS: &cfg.NATS, S3: &cfg.S3})
	if err != nil {
		return err
	}
	defer conns.Close()
	// The ops listener is bound first, so an address in use fails the start.
	opsLn, err := net.Listen("tcp", cfg.Edge.OpsAddr)
	if err != nil {
		return fmt.Errorf("SHIPFILE_OPS_ADDR: %w", err)
	}
	defer opsLn.Close()

	svc, err := gateway.New(ctx, cfg, gateway.Deps{
		Pool: conns.Pool, Objects: conns.Objects, JS: conns.Bus.JS, Registry: ops.NewRegistry(), Log: log,
	})
	if err != nil {
		return err
	}
	if err := svc.ResealSecrets(ctx); err != nil {
		return err
	}
	// The background work (auth feed, token usage, tus sweeper, outbox relay) stops
	// after the HTTP server has drained.
	stop := svc.Start(ctx)
	defer stop()

	opsHandler := ops.Handler(svc.Registry, conns.Checks()...)
	opsCtx, stopOps := context.WithCancel(context.WithoutCancel(ctx))
	opsDone := make(chan error, 1)
	go func() { opsDone <- ops.ServeListener(opsCtx, log, opsLn, opsHandler, time.Second) }()
	// The link routes read from the connection what a download delivered.
	err = ops.Serve(ctx, log, cfg.HTTPAddr, svc.Handler, cfg.ShutdownTimeout, ops.WithIdleTimeout(cfg.Edge.HTTPIdleTimeout), httpapi.WithConnContext)
	// The ops endpoints stay up while the public server drains, then stop.
	stopOps()
	if opsErr := <-opsDone; opsErr != nil && err == nil {
		err = fmt.Errorf("ops listener: %w", opsErr)
	}
	log.Info("stopped")
	return err
}
