// Command mailer sends the recipients' e-mails (magic links) over SMTP, consuming mail
// jobs from NATS JetStream. Several instances share one durable consumer.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/services/mailer/internal/sender"
)

// Config is the mailer's configuration.
type Config struct {
	Addr            string `env:"SHIPFILE_MAILER_ADDR" default:"127.0.0.1:8081" help:"address of /healthz, /readyz and /metrics"`
	NATS            bus.Config
	SMTP            sender.Config
	ShutdownTimeout time.Duration `env:"SHIPFILE_SHUTDOWN_TIMEOUT" default:"20s" help:"grace period for in-flight work on SIGTERM"`
}

func main() { service.Main("mailer", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := config.Parse("mailer", args, os.Stdout, &cfg); err != nil {
		return err
	}
	if err := cfg.SMTP.Validate(); err != nil {
		return err
	}
	log.Info("starting", "config", config.LogValue(&cfg))

	nc, err := bus.Connect(ctx, cfg.NATS.URL, "shipfile-mailer")
	if err != nil {
		return err
	}
	defer nc.Close()

	handler := ops.Handler(ops.NewRegistry(),
		ops.Check{Name: "nats", Fn: nc.Check},
		ops.Check{Name: "smtp", Fn: cfg.SMTP.Check},
	)
	err = ops.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout)
	log.Info("stopped")
	return err
}
