// Command scanner streams every uploaded file from the object store to clamd (INSTREAM),
// records the verdict once per file, and quarantines malware: the object deleted (or
// moved to the quarantine bucket), the owner e-mailed, package.file_infected published.
// Several instances share one durable consumer of package.file_uploaded.
package main

import (
	"context"
	"log/slog"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/pkg/storage"
	scanner "github.com/shipfile/shipfile/services/scanner/internal/service"
)

// Config is the scanner's configuration.
type Config = scanner.Config

func main() { service.Main("scanner", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := service.Load("scanner", args, log, &cfg); err != nil {
		return err
	}

	pool, err := database.Open(ctx, cfg.Database.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := events.Connect(ctx, cfg.NATS, "shipfile-scanner")
	if err != nil {
		return err
	}
	defer nc.Close()
	objects, err := storage.Open(ctx, cfg.S3)
	if err != nil {
		return err
	}
	svc, err := scanner.New(ctx, cfg, scanner.Deps{Pool: pool, Objects: objects, JS: nc.JS, Registry: ops.NewRegistry(), Log: log})
	if err != nil {
		return err
	}

	handler := ops.Handler(svc.Registry,
		ops.Check{Name: "postgres", Fn: pool.Ping},
		ops.Check{Name: "nats", Fn: nc.Check},
		ops.Check{Name: "s3", Fn: objects.Check},
		ops.Check{Name: "clamd", Fn: svc.Clamd.Ping},
	)
	return service.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout, svc.Run)
}
