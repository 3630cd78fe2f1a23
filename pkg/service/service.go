// Package service runs a shipfile binary's lifecycle: a JSON logger, a context that is
// cancelled on SIGINT/SIGTERM, and the exit status of its run function; the shared
// skeleton of a run (Load the configuration, Open PostgreSQL, NATS and S3, Serve the ops
// endpoints beside the work). Every binary, shipctl included, opens its connections
// with Open.
package service

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/logging"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/tracing"
)

// tracingFlushTimeout bounds exporting the spans still buffered when a binary stops.
const tracingFlushTimeout = 5 * time.Second

// RunFunc is a service's body: it runs until ctx is cancelled, then drains and returns.
type RunFunc func(ctx context.Context, log *slog.Logger, args []string) error

// Main runs fn with the process arguments and exits non-zero when it fails. A
// config.ErrHelp from fn (after --help printed the usage) exits 0. Tracing is set up
// from the OTEL_* variables before fn runs (tracing.Setup) and flushed after it returns.
func Main(name string, fn RunFunc) {
	log := logging.New(name)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	shutdownTracing, err := tracing.Setup(ctx, name)
	if err != nil {
		log.Error(name+" stopped", "err", err)
		os.Exit(1)
	}
	err = fn(ctx, log, os.Args[1:])
	stop()
	flushCtx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	if ferr := shutdownTracing(flushCtx); ferr != nil {
		log.Warn("tracing: flush", "err", ferr)
	}
	cancel()
	if err != nil && !errors.Is(err, config.ErrHelp) {
		log.Error(name+" stopped", "err", err)
		os.Exit(1)
	}
}

// LoggerOr returns log, or a logger that discards everything when log is nil: the
// default of a service graph's Deps.Log.
func LoggerOr(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// RegistryOr returns reg, or a new registry when reg is nil: the default of a service
// graph's Deps.Registry.
func RegistryOr(reg *prometheus.Registry) *prometheus.Registry {
	if reg == nil {
		return prometheus.NewRegistry()
	}
	return reg
}

// Validator is a configuration that checks itself (and fills in derived defaults)
// after parsing.
type Validator interface{ Validate() error }

// Load parses the service's configuration from the environment and args into cfg,
// validates it when it is a Validator, and logs it (secrets masked).
func Load(name string, args []string, log *slog.Logger, cfg any) error {
	if err := config.Parse(name, args, os.Stdout, cfg); err != nil {
		return err
	}
	if v, ok := cfg.(Validator); ok {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	log.Info("starting", "config", config.LogValue(cfg))
	return nil
}

// Serve runs work until ctx is done or work returns, serving the ops endpoints (h:
// /healthz, /readyz, /metrics) on addr meanwhile; either ending stops the other (the
// server within grace). It returns both errors joined.
func Serve(ctx context.Context, log *slog.Logger, addr string, h http.Handler, grace time.Duration, work func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workErr := make(chan error, 1)
	go func() {
		err := work(ctx)
		cancel()
		workErr <- err
	}()
	serveErr := ops.Serve(ctx, log, addr, h, grace)
	cancel()
	err := errors.Join(<-workErr, serveErr)
	log.Info("stopped")
	return err
}
