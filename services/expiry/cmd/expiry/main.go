// Command expiry finds packages whose time is up, expires them, deletes their objects
// and emits package.expired. Several instances may run; row locks keep them apart.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/outbox"
	"github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/expiry/internal/app"
	"github.com/shipfile/shipfile/services/expiry/internal/store"
)

// Config is the expiry service's configuration.
type Config struct {
	Addr            string `env:"SHIPFILE_EXPIRY_ADDR" default:"127.0.0.1:8082" help:"address of /healthz, /readyz and /metrics"`
	Database        database.Config
	NATS            bus.Config
	S3              storage.Config
	Interval        time.Duration `env:"SHIPFILE_EXPIRY_INTERVAL" default:"1m" help:"how often to look for packages whose time is up (and delete queued objects)"`
	BatchSize       int           `env:"SHIPFILE_EXPIRY_BATCH_SIZE" default:"500" help:"packages expired per transaction; a tick runs batches until none is overdue"`
	StaleUploadAge  time.Duration `env:"SHIPFILE_EXPIRY_STALE_UPLOAD_AGE" default:"24h" help:"abort incomplete multipart uploads under packages/ older than this (0 turns it off)"`
	OrphanGrace     time.Duration `env:"SHIPFILE_ORPHAN_GRACE" default:"1h" help:"remove the object of an upload whose file row did not commit (a crash, a failed insert) once its key has been reserved this long (at least 10m: a gateway renews the reservation of an upload in progress every 5m)"`
	ShutdownTimeout time.Duration `env:"SHIPFILE_SHUTDOWN_TIMEOUT" default:"20s" help:"grace period for in-flight work on SIGTERM"`
}

// validate checks what the parser cannot.
func (c *Config) validate() error {
	errs := []error{c.NATS.Validate()}
	if c.Interval <= 0 {
		errs = append(errs, errors.New("SHIPFILE_EXPIRY_INTERVAL must be positive"))
	}
	if c.BatchSize < 1 || c.BatchSize > 10000 {
		errs = append(errs, errors.New("SHIPFILE_EXPIRY_BATCH_SIZE must be between 1 and 10000"))
	}
	if c.StaleUploadAge < 0 {
		errs = append(errs, errors.New("SHIPFILE_EXPIRY_STALE_UPLOAD_AGE must not be negative"))
	}
	if c.OrphanGrace < MinOrphanGrace {
		errs = append(errs, fmt.Errorf("SHIPFILE_ORPHAN_GRACE must be at least %s: a gateway renews the reservation of an upload in progress every 5m", MinOrphanGrace))
	}
	return errors.Join(errs...)
}

// MinOrphanGrace is twice the gateway's renewal of an upload's reservation
// (app.ObjectReservationRenewal in services/gateway), so an upload in progress is never
// taken for an orphan.
const MinOrphanGrace = 10 * time.Minute

// flushTimeout bounds publishing the last outbox rows at shutdown.
const flushTimeout = 5 * time.Second

func main() { service.Main("expiry", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := config.Parse("expiry", args, os.Stdout, &cfg); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	log.Info("starting", "config", config.LogValue(&cfg))

	pool, err := database.Open(ctx, cfg.Database.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := events.Connect(ctx, cfg.NATS, "shipfile-expiry")
	if err != nil {
		return err
	}
	defer nc.Close()
	objects, err := storage.Open(ctx, cfg.S3)
	if err != nil {
		return err
	}

	reg := ops.NewRegistry()
	metrics, err := app.NewMetrics(reg)
	if err != nil {
		return err
	}
	// The service runs an outbox relay of its own, so package.expired is published even
	// when no gateway runs; relays share the table safely (FOR UPDATE SKIP LOCKED, and
	// the stream drops a re-published Nats-Msg-Id). The store wakes it after each
	// commit that wrote events. It stops after the expirer, then publishes what the last
	// batch wrote.
	relay := outbox.NewRelay(pool, nc.JS, outbox.Options{Log: log, Registerer: reg})
	expirer := app.New(store.New(pool, store.WithOutboxWake(relay.Wake)), store.NewObjects(objects), metrics, log, app.Options{
		Interval:       cfg.Interval,
		BatchSize:      cfg.BatchSize,
		StaleUploadAge: cfg.StaleUploadAge,
		OrphanGrace:    cfg.OrphanGrace,
	})

	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(relayCtx) }()
	defer func() {
		stopRelay()
		if err := <-relayDone; err != nil {
			log.Error("outbox relay", "err", err)
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		if err := relay.Flush(fctx); err != nil {
			log.Warn("outbox: publish at shutdown; another instance or the next start publishes the rest", "err", err)
		}
	}()

	// The expirer stops when ctx is cancelled (or the ops server fails).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	expirerDone := make(chan error, 1)
	go func() { expirerDone <- expirer.Run(ctx) }()

	handler := ops.Handler(reg,
		ops.Check{Name: "postgres", Fn: pool.Ping},
		ops.Check{Name: "nats", Fn: nc.Check},
		ops.Check{Name: "s3", Fn: objects.Check},
	)
	serveErr := ops.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout)
	cancel()
	err = errors.Join(<-expirerDone, serveErr)
	log.Info("stopped")
	return err
}
