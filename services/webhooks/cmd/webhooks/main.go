// Command webhooks fans package events out to webhook subscriptions and delivers signed
// POSTs with retries, keeping a delivery log. Several instances share durable consumers.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/secretbox"
	"github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/store"
	"github.com/shipfile/shipfile/services/webhooks/internal/transport"
)

// Config is the webhook dispatcher's configuration.
type Config struct {
	Addr               string `env:"SHIPFILE_WEBHOOKS_ADDR" default:"127.0.0.1:8083" help:"address of /healthz, /readyz and /metrics"`
	Database           database.Config
	NATS               bus.Config
	Secrets            secretbox.Config
	AllowPrivate       bool            `env:"SHIPFILE_WEBHOOK_ALLOW_PRIVATE" default:"false" help:"allow deliveries to loopback, private and link-local addresses"`
	RetrySchedule      []time.Duration `env:"SHIPFILE_WEBHOOK_RETRY_SCHEDULE" default:"10s,1m,5m,30m,2h,6h,12h" help:"waits between delivery attempts (a delivery gets one attempt more than waits)"`
	Timeout            time.Duration   `env:"SHIPFILE_WEBHOOK_TIMEOUT" default:"10s" help:"time a receiver has to answer"`
	Workers            int             `env:"SHIPFILE_WEBHOOK_WORKERS" default:"16" help:"concurrent delivery workers of this instance"`
	MaxInFlightPerHook int             `env:"SHIPFILE_WEBHOOK_MAX_IN_FLIGHT_PER_HOOK" default:"4" help:"attempts in flight per subscription in this instance"`
	DisableAfter       time.Duration   `env:"SHIPFILE_WEBHOOK_DISABLE_AFTER" default:"120h" help:"disable a subscription whose deliveries have all failed for this long"`
	AckWait            time.Duration   `env:"SHIPFILE_WEBHOOK_ACK_WAIT" default:"" help:"JetStream AckWait of delivery jobs (default: SHIPFILE_WEBHOOK_TIMEOUT + 5s)"`
	MaxAckPending      int             `env:"SHIPFILE_WEBHOOK_MAX_ACK_PENDING" default:"100000" help:"delivery jobs in flight or waiting for their retry, across all instances (JetStream MaxAckPending; when reached, new jobs wait)"`
	FanoutConsumer     string          `env:"SHIPFILE_WEBHOOK_FANOUT_CONSUMER" default:"webhooks-fanout" help:"durable JetStream consumer of package events, shared by every instance"`
	DeliverConsumer    string          `env:"SHIPFILE_WEBHOOK_DELIVER_CONSUMER" default:"webhooks-deliver" help:"durable JetStream consumer of delivery jobs, shared by every instance (its lag is what to scale on)"`
	ShutdownTimeout    time.Duration   `env:"SHIPFILE_SHUTDOWN_TIMEOUT" default:"20s" help:"grace period for in-flight work on SIGTERM"`
}

// validate checks what the parser cannot, and fills in derived defaults.
func (c *Config) validate() error {
	var errs []error
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("SHIPFILE_WEBHOOK_TIMEOUT must be positive"))
	}
	if c.Workers < 1 {
		errs = append(errs, errors.New("SHIPFILE_WEBHOOK_WORKERS must be at least 1"))
	}
	if c.MaxInFlightPerHook < 1 {
		errs = append(errs, errors.New("SHIPFILE_WEBHOOK_MAX_IN_FLIGHT_PER_HOOK must be at least 1"))
	}
	if c.MaxAckPending < 1 {
		errs = append(errs, errors.New("SHIPFILE_WEBHOOK_MAX_ACK_PENDING must be at least 1"))
	}
	for _, d := range c.RetrySchedule {
		if d <= 0 {
			errs = append(errs, errors.New("SHIPFILE_WEBHOOK_RETRY_SCHEDULE: every wait must be positive"))
			break
		}
	}
	if c.FanoutConsumer == "" {
		c.FanoutConsumer = transport.FanoutConsumer
	}
	if c.DeliverConsumer == "" {
		c.DeliverConsumer = transport.DeliverConsumer
	}
	for _, v := range [][2]string{{"SHIPFILE_WEBHOOK_FANOUT_CONSUMER", c.FanoutConsumer}, {"SHIPFILE_WEBHOOK_DELIVER_CONSUMER", c.DeliverConsumer}} {
		if strings.ContainsAny(v[1], " \t\r\n.*>/\\") {
			errs = append(errs, fmt.Errorf("%s (%q): a JetStream consumer name has no whitespace, '.', '*', '>', '/' or '\\'", v[0], v[1]))
		}
	}
	if c.FanoutConsumer == c.DeliverConsumer {
		errs = append(errs, errors.New("SHIPFILE_WEBHOOK_FANOUT_CONSUMER and SHIPFILE_WEBHOOK_DELIVER_CONSUMER must differ"))
	}
	if err := c.NATS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.AckWait == 0 {
		c.AckWait = c.Timeout + 5*time.Second
	} else if c.AckWait <= c.Timeout {
		errs = append(errs, fmt.Errorf("SHIPFILE_WEBHOOK_ACK_WAIT (%s) must exceed SHIPFILE_WEBHOOK_TIMEOUT (%s)", c.AckWait, c.Timeout))
	}
	return errors.Join(errs...)
}

// dispatchOptions gives the names of the streams, subjects and consumers; this
// package's tests replace it to run on streams of their own.
var dispatchOptions = transport.DefaultOptions

func main() { service.Main("webhooks", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := config.Parse("webhooks", args, os.Stdout, &cfg); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	secrets, err := cfg.Secrets.Keyring()
	if err != nil {
		return err
	}
	log.Info("starting", "config", config.LogValue(&cfg))

	pool, err := database.Open(ctx, cfg.Database.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := events.Connect(ctx, cfg.NATS, "shipfile-webhooks")
	if err != nil {
		return err
	}
	defer nc.Close()

	reg := ops.NewRegistry()
	metrics, err := app.NewMetrics(reg)
	if err != nil {
		return err
	}
	opts := dispatchOptions()
	opts.AckWait = cfg.AckWait
	opts.MaxAckPending = cfg.MaxAckPending
	opts.Workers = cfg.Workers
	opts.ShutdownTimeout = cfg.ShutdownTimeout
	opts.FanoutConsumer = cfg.FanoutConsumer
	opts.DeliverConsumer = cfg.DeliverConsumer

	st := store.New(pool, secrets)
	sender := transport.NewSender(transport.SenderOptions{Timeout: cfg.Timeout, AllowPrivate: cfg.AllowPrivate})
	fanout := app.NewFanout(st, transport.NewJobPublisher(nc.JS, opts.JobSubjectPrefix), log)
	deliverer := app.NewDeliverer(st, sender, metrics, log, app.DeliveryOptions{
		Schedule:           cfg.RetrySchedule,
		MaxInFlightPerHook: cfg.MaxInFlightPerHook,
		DisableAfter:       cfg.DisableAfter,
	})
	dispatcher := transport.NewDispatcher(nc.JS, fanout, deliverer, metrics, log, opts)

	// Either part failing stops the other; a stop signal stops both.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dispatchErr := make(chan error, 1)
	go func() {
		err := dispatcher.Run(ctx)
		cancel()
		dispatchErr <- err
	}()
	handler := ops.Handler(reg,
		ops.Check{Name: "postgres", Fn: pool.Ping},
		ops.Check{Name: "nats", Fn: nc.Check},
	)
	serveErr := ops.Serve(ctx, log, cfg.Addr, handler, cfg.ShutdownTimeout)
	cancel()
	err = errors.Join(<-dispatchErr, serveErr)
	log.Info("stopped")
	return err
}
