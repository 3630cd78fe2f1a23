// Package service builds the mailer's whole graph from its configuration (store → app
// → transport): the binary's run and the test harnesses call New, so they run what
// production runs.
package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/backoff"
	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/database"
	pkgservice "github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/services/mailer/internal/app"
	"github.com/shipfile/shipfile/services/mailer/internal/store"
	"github.com/shipfile/shipfile/services/mailer/internal/transport"
)

// Config is the mailer's configuration.
type Config struct {
	Addr            string `env:"SHIPFILE_MAILER_ADDR" default:"127.0.0.1:8081" help:"address of /healthz, /readyz and /metrics"`
	Database        database.Config
	NATS            bus.Config
	SMTP            transport.SMTPConfig
	RetrySchedule   []time.Duration `env:"SHIPFILE_MAIL_RETRY_SCHEDULE" default:"10s,1m,5m,30m,2h,6h,12h" help:"waits between send attempts after transient SMTP failures (a job gets one attempt more than waits, then fails)"`
	Workers         int             `env:"SHIPFILE_MAILER_WORKERS" default:"4" help:"concurrent sends of this instance"`
	AckWait         time.Duration   `env:"SHIPFILE_MAIL_ACK_WAIT" default:"" help:"JetStream AckWait of mail jobs; a send reports progress every half of it (default: SHIPFILE_SMTP_TIMEOUT + 10s)"`
	MaxAckPending   int             `env:"SHIPFILE_MAIL_MAX_ACK_PENDING" default:"10000" help:"mail jobs in flight or waiting for their retry, across all instances (JetStream MaxAckPending; when reached, new jobs wait)"`
	ShutdownTimeout time.Duration   `env:"SHIPFILE_SHUTDOWN_TIMEOUT" default:"20s" help:"grace period for in-flight sends on SIGTERM"`
	PublicURL       string          `env:"SHIPFILE_PUBLIC_URL" default:"http://127.0.0.1:8080" help:"the gateway's public URL: owner notifications link to PUBLIC_URL/packages/{id}"`
	NotifyQuiet     time.Duration   `env:"SHIPFILE_NOTIFY_QUIET" default:"1m" help:"an inbound package's owner is told of a burst of recipient uploads once no further upload arrived for this long"`
	NotifyPoll      time.Duration   `env:"SHIPFILE_NOTIFY_POLL" default:"1s" help:"how often each instance looks for owner notifications that are due"`
}

// Validate checks what the parser cannot, and fills in derived defaults.
func (c *Config) Validate() error {
	errs := []error{c.SMTP.Validate(), c.NATS.Validate()}
	if c.Workers < 1 {
		errs = append(errs, errors.New("SHIPFILE_MAILER_WORKERS must be at least 1"))
	}
	if c.NotifyQuiet <= 0 || c.NotifyPoll <= 0 {
		errs = append(errs, errors.New("SHIPFILE_NOTIFY_QUIET and SHIPFILE_NOTIFY_POLL must be positive"))
	}
	if c.MaxAckPending < 1 {
		errs = append(errs, errors.New("SHIPFILE_MAIL_MAX_ACK_PENDING must be at least 1"))
	}
	if err := backoff.CheckSchedule("SHIPFILE_MAIL_RETRY_SCHEDULE", c.RetrySchedule); err != nil {
		errs = append(errs, err)
	}
	if c.AckWait == 0 {
		c.AckWait = c.SMTP.Timeout + 10*time.Second
	} else if c.AckWait < time.Second {
		errs = append(errs, errors.New("SHIPFILE_MAIL_ACK_WAIT must be at least 1s"))
	}
	return errors.Join(errs...)
}

// PoolSize is the database connections the mailer needs: each worker holds one while
// it sends, so does the owner notifications' sender; the rest serve their event
// workers and readiness checks.
func (c *Config) PoolSize() int { return c.Workers + 6 }

// Deps are what New connects the graph to, and what tests adjust.
type Deps struct {
	Pool *pgxpool.Pool
	JS   jetstream.JetStream
	// Registry receives the metrics; nil: a new registry (Service.Registry).
	Registry *prometheus.Registry
	Log      *slog.Logger
	// SMTPOptions adjust the sender (e.g. transport.WithRootCAs).
	SMTPOptions []transport.SMTPOption
	// Mail, Notify and App adjust the consumers' and the mailer's options after the
	// configuration set them (tests: their own stream names, shorter waits).
	Mail   func(*transport.Options)
	Notify func(*transport.NotifyOptions)
	App    func(*app.Options)
}

// Service is the mailer's graph.
type Service struct {
	Registry *prometheus.Registry
	Metrics  *app.Metrics
	Sender   *transport.SMTP
	Mailer   *app.Mailer
	// Mail consumes the mail jobs; Notify the package events of owner notifications.
	Mail   *transport.Consumer
	Notify *transport.NotifyConsumer
}

// New builds the mailer's graph from cfg on deps. It starts nothing: Run does.
func New(_ context.Context, cfg Config, deps Deps) (*Service, error) {
	log := pkgservice.LoggerOr(deps.Log)
	reg := pkgservice.RegistryOr(deps.Registry)
	metrics, err := app.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	consumerMetrics, err := consumer.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	sender, err := transport.NewSMTP(cfg.SMTP, deps.SMTPOptions...)
	if err != nil {
		return nil, err
	}
	aopts := app.Options{Schedule: cfg.RetrySchedule}
	if deps.App != nil {
		deps.App(&aopts)
	}
	opts := transport.DefaultOptions()
	opts.AckWait = cfg.AckWait
	opts.MaxAckPending = cfg.MaxAckPending
	opts.Workers = cfg.Workers
	opts.ShutdownTimeout = cfg.ShutdownTimeout
	opts.Metrics = consumerMetrics
	if deps.Mail != nil {
		deps.Mail(&opts)
	}
	nopts := transport.DefaultNotifyOptions()
	nopts.Poll = cfg.NotifyPoll
	nopts.AckWait = transport.NotifyAckWait(cfg.NotifyQuiet)
	nopts.ShutdownTimeout = cfg.ShutdownTimeout
	nopts.Metrics = consumerMetrics
	if deps.Notify != nil {
		deps.Notify(&nopts)
	}
	st := store.New(deps.Pool)
	mailer := app.NewMailer(st, sender, metrics, log, aopts)
	notifier := app.NewNotifier(st, sender, metrics, log, app.NotifierOptions{
		PublicURL: cfg.PublicURL, Quiet: cfg.NotifyQuiet, Schedule: cfg.RetrySchedule,
	})
	return &Service{
		Registry: reg,
		Metrics:  metrics,
		Sender:   sender,
		Mailer:   mailer,
		Mail:     transport.NewConsumer(deps.JS, mailer, metrics, log, opts),
		Notify:   transport.NewNotifyConsumer(deps.JS, notifier, log, nopts),
	}, nil
}

// Run runs the mail and notification consumers until ctx is done or one fails (which
// stops the other), then drains both.
func (s *Service) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	for _, run := range []func(context.Context) error{s.Mail.Run, s.Notify.Run} {
		go func() {
			err := run(ctx)
			cancel()
			errs <- err
		}()
	}
	return errors.Join(<-errs, <-errs)
}
