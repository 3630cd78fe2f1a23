// Package service runs a shipfile binary's lifecycle: a JSON logger, a context that is
// cancelled on SIGINT/SIGTERM, and the exit status of its run function.
package service

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/logging"
)

// RunFunc is a service's body: it runs until ctx is cancelled, then drains and returns.
type RunFunc func(ctx context.Context, log *slog.Logger, args []string) error

// Main runs fn with the process arguments and exits non-zero when it fails. A
// config.ErrHelp from fn (after --help printed the usage) exits 0.
func Main(name string, fn RunFunc) {
	log := logging.New(name)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := fn(ctx, log, os.Args[1:])
	stop()
	if err != nil && !errors.Is(err, config.ErrHelp) {
		log.Error(name+" stopped", "err", err)
		os.Exit(1)
	}
}
