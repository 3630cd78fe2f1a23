// Command mailer sends the recipients' e-mails (magic links) over SMTP, consuming mail
// jobs from NATS JetStream: each job once, transient failures retried on a schedule,
// permanent rejections recorded in the package's audit log. Several instances share
// one durable consumer.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/service"
	mailer "github.com/shipfile/shipfile/services/mailer/internal/service"
	"github.com/shipfile/shipfile/services/mailer/internal/store"
)

// Config is the mailer's configuration.
type Config = mailer.Config

func main() { service.Main("mailer", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := config.Parse("mailer", args, os.Stdout, &cfg); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log.Info("starting", "config", config.LogValue(&cfg))

	pool, err := store.Open(ctx, cfg.Database.URL, cfg.PoolSize())
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := events.Connect(ctx, cfg.NATS, "shipfile-mailer")
	if err != nil {
		return err
	}
	defer nc.Close()
	svc, err := mailer.New(ctx, cfg, mailer.Deps{Pool: pool, JS: nc.JS, Registry: ops.NewRegistry(), Log: log})
	if err != nil {
		return err
	}

	// Either part failing stops the other; a stop signal stops both.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() {
		err := svc.Run(ctx)
		cancel()
		runErr <- err
	}()
	handler := ops.Handler(svc.Registry,
		ops.Check{Name: "postgres", Fn: pool.Ping},
		ops.Check{Name: "nats", Fn: nc.Check},
		ops.Check{Name: "smtp", Fn: svc.Sender.Check},
	)
	serveErr := ops.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout)
	cancel()
	err = errors.Join(<-runErr, serveErr)
	log.Info("stopped")
	return err
}
