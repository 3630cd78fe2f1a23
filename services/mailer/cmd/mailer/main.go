// Command mailer sends the recipients' e-mails (magic links) over SMTP, consuming mail
// jobs from NATS JetStream: each job once, transient failures retried on a schedule,
// permanent rejections recorded in the package's audit log. Several instances share
// one durable consumer.
package main

import (
	"context"
	"log/slog"

	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/service"
	mailer "github.com/shipfile/shipfile/services/mailer/internal/service"
)

// Config is the mailer's configuration.
type Config = mailer.Config

func main() { service.Main("mailer", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := service.Load("mailer", args, log, &cfg); err != nil {
		return err
	}

	// Each worker holds a connection while its e-mail is sent: the pool is sized for them.
	conns, err := service.Open(ctx, "mailer", service.Connections{Database: &cfg.Database, MinConns: cfg.PoolSize(), NATS: &cfg.NATS})
	if err != nil {
		return err
	}
	defer conns.Close()
	svc, err := mailer.New(ctx, cfg, mailer.Deps{Pool: conns.Pool, JS: conns.Bus.JS, Registry: ops.NewRegistry(), Log: log})
	if err != nil {
		return err
	}

	handler := ops.Handler(svc.Registry, conns.Checks(ops.Check{Name: "smtp", Fn: svc.Sender.Check})...)
	return service.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout, svc.Run)
}
