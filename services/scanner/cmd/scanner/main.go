// Command scanner streams every uploaded file from the object store to clamd (INSTREAM),
// records the verdict once per file, and quarantines malware: the object deleted (or
// moved to the quarantine bucket), the owner e-mailed, package.file_infected published.
// Several instances share one durable consumer of package.file_uploaded.
package main

import (
	"context"
	"log/slog"

	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/service"
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

	conns, err := service.Open(ctx, "scanner", service.Connections{Database: &cfg.Database, NATS: &cfg.NATS, S3: &cfg.S3})
	if err != nil {
		return err
	}
	defer conns.Close()
	svc, err := scanner.New(ctx, cfg, scanner.Deps{Pool: conns.Pool, Objects: conns.Objects, JS: conns.Bus.JS, Registry: ops.NewRegistry(), Log: log})
	if err != nil {
		return err
	}

	handler := ops.Handler(svc.Registry, conns.Checks(ops.Check{Name: "clamd", Fn: svc.Clamd.Ping})...)
	return service.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout, svc.Run)
}
