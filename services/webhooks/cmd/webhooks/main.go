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

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

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
	Addr            string `env:"SHIPFILE_WEBHOOKS_ADDR" default:"127.0.0.1:8083" help:"address of /healthz, /readyz and /metrics"`
	Database        database.Config
	NATS            bus.Config
	Secrets         secretbox.Config
	AllowPrivate    bool            `env:"SHIPFILE_WEBHOOK_ALLOW_PRIVATE" default:"false" help:"allow deliveries to loopback, private and link-local addresses"`
	RetrySchedule   []time.Duration `env:"SHIPFILE_WEBHOOK_RETRY_SCHEDULE" default:"10s,1m,5m,30m,2h,6h,12h" help:"waits between delivery attempts (a delivery gets one attempt more than waits)"`
	Timeout         time.Duration   `env:"SHIPFILE_WEBHOOK_TIMEOUT" default:"10s" help:"time a receiver has to answer"`
	Workers         int             `env:"SHIPFILE_WEBHOOK_WORKERS" default:"256" help:"attempts in flight in this instance, all subscriptions together (each subscription also has its max_in_flight, counted across instances)"`
	DisableAfter    time.Duration   `env:"SHIPFILE_WEBHOOK_DISABLE_AFTER" default:"120h" help:"disable a subscription whose deliveries have all failed for this long"`
	HealthInterval  time.Duration   `env:"SHIPFILE_WEBHOOK_HEALTH_INTERVAL" default:"5s" help:"period of the health pass (last success, failing since, disabling; derived from the attempt log) and of the instance heartbeat that shares rate limits"`
	AckWait         time.Duration   `env:"SHIPFILE_WEBHOOK_ACK_WAIT" default:"" help:"JetStream AckWait of delivery jobs: a killed instance's slots come back after it (default: SHIPFILE_WEBHOOK_TIMEOUT + 5s)"`
	MaxAckPending   int             `env:"SHIPFILE_WEBHOOK_MAX_ACK_PENDING" default:"100000" help:"delivery jobs waiting for their next attempt, across all instances (JetStream MaxAckPending of the retry consumer; when reached, new retries wait)"`
	FanoutConsumer  string          `env:"SHIPFILE_WEBHOOK_FANOUT_CONSUMER" default:"webhooks-fanout" help:"durable JetStream consumer of package events, shared by every instance"`
	DeliverConsumer string          `env:"SHIPFILE_WEBHOOK_DELIVER_CONSUMER" default:"webhooks-deliver" help:"prefix of the durable JetStream consumers of delivery jobs, one per subscription (name-<hook id>) shared by every instance; name-retry holds jobs waiting for a retry; the per-subscription consumers' pending jobs are what to scale on"`
	ShutdownTimeout time.Duration   `env:"SHIPFILE_SHUTDOWN_TIMEOUT" default:"20s" help:"grace period for in-flight work on SIGTERM"`
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
	if c.HealthInterval <= 0 {
		errs = append(errs, errors.New("SHIPFILE_WEBHOOK_HEALTH_INTERVAL must be positive"))
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

// newDispatcher builds the dispatcher's graph on st: the subscription cache, fan-out,
// deliverer and health keeper.
func newDispatcher(js jetstream.JetStream, st *store.Postgres, metrics *app.Metrics, log *slog.Logger, opts transport.Options, cfg Config) *transport.Dispatcher {
	subs := app.NewSubscriptions(st)
	rates := app.NewRateLimiter()
	sender := transport.NewSender(transport.SenderOptions{Timeout: cfg.Timeout, AllowPrivate: cfg.AllowPrivate})
	return transport.NewDispatcher(js, transport.Parts{
		Subscriptions: subs,
		Listener:      st,
		Fanout:        app.NewFanout(subs, st, transport.NewJobPublisher(js, opts.JobSubjectPrefix), log),
		Deliverer:     app.NewDeliverer(st, subs, rates, sender, metrics, log, app.DeliveryOptions{Schedule: cfg.RetrySchedule}),
		Health: app.NewHealth(st, subs, rates, log, app.HealthOptions{
			Interval: cfg.HealthInterval, DisableAfter: cfg.DisableAfter, InstanceID: instanceID(),
		}),
		Metrics: metrics,
		Log:     log,
	}, opts)
}

// instanceID names this process in the heartbeat: host, pid and a random part.
func instanceID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8])
}

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

	opts.RetryConsumer = cfg.DeliverConsumer + "-retry"

	dispatcher := newDispatcher(nc.JS, store.New(pool, secrets), metrics, log, opts, cfg)
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
