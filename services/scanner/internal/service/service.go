// Package service builds the scanner's whole graph from its configuration (store → app
// → transport, and the outbox relay that publishes package.file_infected): the binary's
// run and the tests call New, so they run what production runs.
package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/outbox"
	pkgservice "github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/scanner/internal/app"
	"github.com/shipfile/shipfile/services/scanner/internal/store"
	"github.com/shipfile/shipfile/services/scanner/internal/transport"
)

// Config is the scanner's configuration.
type Config struct {
	Addr             string `env:"SHIPFILE_SCANNER_ADDR" default:"127.0.0.1:8085" help:"address of /healthz, /readyz and /metrics"`
	Database         database.Config
	NATS             bus.Config
	S3               storage.Config
	ClamdAddr        string        `env:"SHIPFILE_CLAMD_ADDR" default:"127.0.0.1:3310" help:"clamd's address: host:port, tcp://host:port, unix:/path or /path"`
	Workers          int           `env:"SHIPFILE_SCAN_WORKERS" default:"4" help:"files this instance scans at once (each holds two chunks in memory)"`
	PackageShare     int           `env:"SHIPFILE_SCAN_PACKAGE_SHARE" default:"0" help:"scan slots the files of one package keep while files of other packages wait (0: half of SHIPFILE_SCAN_WORKERS, at least 1); alone, a package uses every slot"`
	MaxSize          int64         `env:"SHIPFILE_SCAN_MAX_SIZE" default:"1073741824" help:"larger files are not scanned but recorded 'unscannable' (keep clamd's StreamMaxLength, MaxScanSize and MaxFileSize above it)"`
	ChunkSize        int           `env:"SHIPFILE_SCAN_CHUNK_SIZE" default:"262144" help:"bytes of one INSTREAM chunk; a scan holds two (one read ahead while the other is sent)"`
	ClamdTimeout     time.Duration `env:"SHIPFILE_CLAMD_TIMEOUT" default:"2m" help:"longest wait for clamd to take a chunk or give the verdict"`
	MaxAttempts      int           `env:"SHIPFILE_SCAN_MAX_ATTEMPTS" default:"5" help:"failed attempts (clamd answered an error, the object could not be read) before a file is recorded 'error'; clamd being down is not counted"`
	RetryMax         time.Duration `env:"SHIPFILE_SCAN_RETRY_MAX" default:"30s" help:"longest wait before a file is tried again (clamd down, a failed attempt)"`
	AckWait          time.Duration `env:"SHIPFILE_SCAN_ACK_WAIT" default:"30s" help:"a file held by a scanner that died is scanned by another after this"`
	QuarantineBucket string        `env:"SHIPFILE_QUARANTINE_BUCKET" default:"" help:"bucket infected objects are moved to; empty: they are deleted"`
	ShutdownTimeout  time.Duration `env:"SHIPFILE_SHUTDOWN_TIMEOUT" default:"20s" help:"grace period for scans in flight on SIGTERM"`
}

// Validate checks what the parser cannot.
func (c *Config) Validate() error {
	errs := []error{c.NATS.Validate()}
	if _, _, err := transport.ParseClamdAddr(c.ClamdAddr); err != nil {
		errs = append(errs, err)
	}
	if c.PackageShare < 0 {
		errs = append(errs, errors.New("SHIPFILE_SCAN_PACKAGE_SHARE must not be negative"))
	}
	if c.Workers < 1 || c.MaxAttempts < 1 {
		errs = append(errs, errors.New("SHIPFILE_SCAN_WORKERS and SHIPFILE_SCAN_MAX_ATTEMPTS must be at least 1"))
	}
	if c.ChunkSize < 1024 || c.ChunkSize > 64<<20 {
		errs = append(errs, errors.New("SHIPFILE_SCAN_CHUNK_SIZE must be between 1 KiB and 64 MiB"))
	}
	if c.MaxSize < 0 || c.ClamdTimeout <= 0 || c.RetryMax <= 0 || c.AckWait < time.Second {
		errs = append(errs, errors.New("SHIPFILE_SCAN_MAX_SIZE must not be negative, SHIPFILE_CLAMD_TIMEOUT and SHIPFILE_SCAN_RETRY_MAX positive, SHIPFILE_SCAN_ACK_WAIT at least 1s"))
	}
	return errors.Join(errs...)
}

// flushTimeout bounds publishing the last outbox rows at shutdown.
const flushTimeout = 5 * time.Second

// Deps are what New connects the graph to, and what tests adjust.
type Deps struct {
	Pool    *pgxpool.Pool
	Objects *storage.Store
	// JS is where the consumer reads and the outbox relay publishes.
	JS jetstream.JetStream
	// Registry receives the metrics; nil: a new registry.
	Registry *prometheus.Registry
	Log      *slog.Logger
	// Consumer adjusts the consumer's options after the configuration set them.
	Consumer func(*transport.Options)
}

// Service is the scanner's graph.
type Service struct {
	Registry *prometheus.Registry
	Metrics  *app.Metrics
	Clamd    *transport.Clamd
	Scanner  *app.Scanner
	Consumer *transport.Consumer
	Relay    *outbox.Relay
	objects  *store.Objects
}

// New builds the scanner's graph from cfg on deps. It starts nothing: Run does.
func New(_ context.Context, cfg Config, deps Deps) (*Service, error) {
	log := pkgservice.LoggerOr(deps.Log)
	reg := pkgservice.RegistryOr(deps.Registry)
	metrics, err := app.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	cm, err := consumer.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	clamd, err := transport.NewClamd(transport.ClamdConfig{Addr: cfg.ClamdAddr, ChunkSize: cfg.ChunkSize, Timeout: cfg.ClamdTimeout})
	if err != nil {
		return nil, err
	}
	// The scanner runs an outbox relay of its own, so package.file_infected is published
	// even when no gateway runs; relays share the table safely.
	relay := outbox.NewRelay(deps.Pool, deps.JS, outbox.Options{Log: log, Registerer: reg})
	objects := store.NewObjects(deps.Objects, cfg.QuarantineBucket)
	scanner := app.New(store.New(deps.Pool, relay.Wake), objects, clamd, metrics, log, app.Options{
		MaxSize: cfg.MaxSize, MaxAttempts: cfg.MaxAttempts, RetryMax: cfg.RetryMax,
		Workers: cfg.Workers, PackageShare: cfg.PackageShare,
	})
	opts := transport.DefaultOptions()
	opts.AckWait, opts.Workers, opts.ShutdownTimeout, opts.Metrics = cfg.AckWait, cfg.Workers, cfg.ShutdownTimeout, cm
	if deps.Consumer != nil {
		deps.Consumer(&opts)
	}
	return &Service{
		Registry: reg, Metrics: metrics, Clamd: clamd, Scanner: scanner, Relay: relay, objects: objects,
		Consumer: transport.NewConsumer(deps.JS, scanner, log, opts),
	}, nil
}

// Run runs the consumer until ctx is done, and the relay until the consumer stopped;
// then the relay publishes what the last scans wrote.
func (s *Service) Run(ctx context.Context) error {
	if err := s.objects.EnsureQuarantine(ctx); err != nil {
		return err
	}
	return s.Relay.RunBeside(ctx, flushTimeout, s.Consumer.Run)
}
