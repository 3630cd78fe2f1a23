// Package service builds the expiry service's whole graph from its configuration
// (store → app, and the outbox relay that publishes package.expired): the binary's run
// and the tests call New, so they run what production runs.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/outbox"
	pkgservice "github.com/shipfile/shipfile/pkg/service"
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
	AuditRetention  time.Duration `env:"SHIPFILE_AUDIT_RETENTION" default:"365d" help:"remove audit log entries older than this (units up to d, e.g. 365d or 90d12h; 0 keeps them for ever)"`
	AuditCheckpoint time.Duration `env:"SHIPFILE_AUDIT_CHECKPOINT" default:"1h" help:"publish the audit chain's head as an audit.checkpoint event this often (one instance each time; 0: never)"`
	ShutdownTimeout time.Duration `env:"SHIPFILE_SHUTDOWN_TIMEOUT" default:"20s" help:"grace period for in-flight work on SIGTERM"`
}

// Validate checks what the parser cannot.
func (c *Config) Validate() error {
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
	if c.AuditCheckpoint < 0 {
		errs = append(errs, errors.New("SHIPFILE_AUDIT_CHECKPOINT must not be negative"))
	}
	if c.AuditRetention < 0 {
		errs = append(errs, errors.New("SHIPFILE_AUDIT_RETENTION must not be negative"))
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

// Deps are what New connects the graph to, and what tests adjust.
type Deps struct {
	Pool    *pgxpool.Pool
	Objects *storage.Store
	// JS is where the outbox relay publishes; nil: no relay (tests of the expirer
	// alone, whose events stay in the outbox).
	JS jetstream.JetStream
	// Registry receives the metrics; nil: a new registry (Service.Registry).
	Registry *prometheus.Registry
	Log      *slog.Logger
	// App adjusts the expirer's options after the configuration set them.
	App func(*app.Options)
}

// Service is the expiry service's graph.
type Service struct {
	Registry *prometheus.Registry
	Metrics  *app.Metrics
	Expirer  *app.Expirer
	// Relay publishes the outbox rows the expirer writes; nil without Deps.JS.
	Relay *outbox.Relay
}

// New builds the expiry service's graph from cfg on deps. It starts nothing: Run does.
func New(_ context.Context, cfg Config, deps Deps) (*Service, error) {
	log := pkgservice.LoggerOr(deps.Log)
	reg := pkgservice.RegistryOr(deps.Registry)
	metrics, err := app.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	s := &Service{Registry: reg, Metrics: metrics}
	var storeOpts []store.Option
	if deps.JS != nil {
		// The service runs an outbox relay of its own, so package.expired is published
		// even when no gateway runs; relays share the table safely (FOR UPDATE SKIP
		// LOCKED, and the stream drops a re-published Nats-Msg-Id). The store wakes it
		// after each commit that wrote events.
		s.Relay = outbox.NewRelay(deps.Pool, deps.JS, outbox.Options{Log: log, Registerer: reg})
		storeOpts = append(storeOpts, store.WithOutboxWake(s.Relay.Wake))
	}
	opts := app.Options{
		Interval:        cfg.Interval,
		BatchSize:       cfg.BatchSize,
		StaleUploadAge:  cfg.StaleUploadAge,
		OrphanGrace:     cfg.OrphanGrace,
		AuditRetention:  cfg.AuditRetention,
		AuditCheckpoint: cfg.AuditCheckpoint,
	}
	if deps.App != nil {
		deps.App(&opts)
	}
	s.Expirer = app.New(store.New(deps.Pool, storeOpts...), store.NewObjects(deps.Objects), metrics, log, opts)
	return s, nil
}

// Run runs the expirer until ctx is done, and the relay until the expirer stopped;
// then the relay publishes what the last batch wrote.
func (s *Service) Run(ctx context.Context) error {
	if s.Relay == nil {
		return s.Expirer.Run(ctx)
	}
	return s.Relay.RunBeside(ctx, flushTimeout, s.Expirer.Run)
}
