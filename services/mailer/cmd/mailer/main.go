// Command mailer sends the recipients' e-mails (magic links) over SMTP, consuming mail
// jobs from NATS JetStream: each job once, transient failures retried on a schedule,
// permanent rejections recorded in the package's audit log. Several instances share
// one durable consumer.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/service"
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

// validate checks what the parser cannot, and fills in derived defaults.
func (c *Config) validate() error {
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
	for _, d := range c.RetrySchedule {
		if d <= 0 {
			errs = append(errs, errors.New("SHIPFILE_MAIL_RETRY_SCHEDULE: every wait must be positive"))
			break
		}
	}
	if c.AckWait == 0 {
		c.AckWait = c.SMTP.Timeout + 10*time.Second
	} else if c.AckWait < time.Second {
		errs = append(errs, errors.New("SHIPFILE_MAIL_ACK_WAIT must be at least 1s"))
	}
	return errors.Join(errs...)
}

// consumerOptions gives the names of the stream and consumer; this package's tests
// may replace it.
var consumerOptions = transport.DefaultOptions

// notifyOptions gives the names of the owner notifications' stream and consumer.
var notifyOptions = transport.DefaultNotifyOptions

func main() { service.Main("mailer", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := config.Parse("mailer", args, os.Stdout, &cfg); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	log.Info("starting", "config", config.LogValue(&cfg))

	// Each worker holds a connection while it sends, so does the owner notifications'
	// sender; the rest serve their event workers and readiness checks.
	pool, err := store.Open(ctx, cfg.Database.URL, cfg.Workers+6)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := events.Connect(ctx, cfg.NATS, "shipfile-mailer")
	if err != nil {
		return err
	}
	defer nc.Close()
	sender, err := transport.NewSMTP(cfg.SMTP)
	if err != nil {
		return err
	}

	reg := ops.NewRegistry()
	metrics, err := app.NewMetrics(reg)
	if err != nil {
		return err
	}
	opts := consumerOptions()
	opts.AckWait = cfg.AckWait
	opts.MaxAckPending = cfg.MaxAckPending
	opts.Workers = cfg.Workers
	opts.ShutdownTimeout = cfg.ShutdownTimeout
	mailer := app.NewMailer(store.New(pool), sender, metrics, log, app.Options{Schedule: cfg.RetrySchedule})
	consumer := transport.NewConsumer(nc.JS, mailer, metrics, log, opts)
	nopts := notifyOptions()
	nopts.Poll = cfg.NotifyPoll
	nopts.ShutdownTimeout = cfg.ShutdownTimeout
	notifier := app.NewNotifier(store.New(pool), sender, metrics, log, app.NotifierOptions{
		PublicURL: cfg.PublicURL, Quiet: cfg.NotifyQuiet, Schedule: cfg.RetrySchedule,
	})
	notifyConsumer := transport.NewNotifyConsumer(nc.JS, notifier, log, nopts)

	// Any part failing stops the others; a stop signal stops them all.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	consumeErr := make(chan error, 2)
	go func() {
		err := consumer.Run(ctx)
		cancel()
		consumeErr <- err
	}()
	go func() {
		err := notifyConsumer.Run(ctx)
		cancel()
		consumeErr <- err
	}()
	handler := ops.Handler(reg,
		ops.Check{Name: "postgres", Fn: pool.Ping},
		ops.Check{Name: "nats", Fn: nc.Check},
		ops.Check{Name: "smtp", Fn: sender.Check},
	)
	serveErr := ops.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout)
	cancel()
	err = errors.Join(<-consumeErr, <-consumeErr, serveErr)
	log.Info("stopped")
	return err
}
