// Package service builds the webhook dispatcher's whole graph from its configuration
// (store → app → transport): the binary's run and the test harnesses call New, so they
// run what production runs.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/backoff"
	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/secretbox"
	pkgservice "github.com/shipfile/shipfile/pkg/service"
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
	LogRetention    time.Duration   `env:"SHIPFILE_WEBHOOK_LOG_RETENTION" default:"90d" help:"remove delivery attempts older than this, and the deliveries no longer pending and unchanged for as long (units up to d; 0 keeps them for ever; keep it above the retry schedule's total)"`
	AckWait         time.Duration   `env:"SHIPFILE_WEBHOOK_ACK_WAIT" default:"" help:"JetStream AckWait of delivery jobs: a killed instance's slots come back after it (default: SHIPFILE_WEBHOOK_TIMEOUT + 5s)"`
	MaxAckPending   int             `env:"SHIPFILE_WEBHOOK_MAX_ACK_PENDING" default:"100000" help:"delivery jobs waiting for their next attempt, across all instances (JetStream MaxAckPending of the retry consumer; when reached, new retries wait)"`
	FanoutConsumer  string          `env:"SHIPFILE_WEBHOOK_FANOUT_CONSUMER" default:"webhooks-fanout" help:"the consumer of package events of the versions before the one hop (one shared fan-out): deleted once every subscription has its own consumer of the events"`
	DeliverConsumer string          `env:"SHIPFILE_WEBHOOK_DELIVER_CONSUMER" default:"webhooks-deliver" help:"prefix of the durable JetStream consumers of SHIPFILE_EVENTS, one per subscription (name-<hook id>: its events and due jobs) shared by every instance; name-retry holds jobs waiting for a retry and name-queued moves redeliveries; the per-subscription consumers' pending messages are what to scale on"`
	ShutdownTimeout time.Duration   `env:"SHIPFILE_SHUTDOWN_TIMEOUT" default:"20s" help:"grace period for in-flight work on SIGTERM"`
}

// Validate checks what the parser cannot, and fills in derived defaults.
func (c *Config) Validate() error {
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
	if c.LogRetention < 0 {
		errs = append(errs, errors.New("SHIPFILE_WEBHOOK_LOG_RETENTION must not be negative"))
	}
	if c.MaxAckPending < 1 {
		errs = append(errs, errors.New("SHIPFILE_WEBHOOK_MAX_ACK_PENDING must be at least 1"))
	}
	if err := backoff.CheckSchedule("SHIPFILE_WEBHOOK_RETRY_SCHEDULE", c.RetrySchedule); err != nil {
		errs = append(errs, err)
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

// Deps are what New connects the graph to, and what tests adjust.
type Deps struct {
	Pool *pgxpool.Pool
	JS   jetstream.JetStream
	// Registry receives the metrics; nil: a new registry (Service.Registry).
	Registry *prometheus.Registry
	Log      *slog.Logger
	// Options name the streams, subjects and consumers (zero: the production names);
	// the configuration's consumer names and tuning are set on top.
	Options transport.Options
	// Tune adjusts the dispatcher's options last (tests: shorter waits).
	Tune func(*transport.Options)
	// InstanceID names this process in the heartbeat; "" derives one from the host,
	// the pid and a random part.
	InstanceID string
}

// Service is the dispatcher's graph.
type Service struct {
	Registry   *prometheus.Registry
	Metrics    *app.Metrics
	Dispatcher *transport.Dispatcher
}

// New builds the dispatcher's graph from cfg on deps: the store (opening the secrets
// with cfg.Secrets' keyring), the subscription cache, event jobs, the order of ordered
// subscriptions' deliveries, deliverer, health keeper and the dispatcher. It starts nothing: Run does.
func New(_ context.Context, cfg Config, deps Deps) (*Service, error) {
	secrets, err := cfg.Secrets.Keyring()
	if err != nil {
		return nil, err
	}
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
	opts := deps.Options
	opts.AckWait = cfg.AckWait
	opts.MaxAckPending = cfg.MaxAckPending
	opts.Workers = cfg.Workers
	opts.ShutdownTimeout = cfg.ShutdownTimeout
	if cfg.FanoutConsumer != "" {
		opts.FanoutConsumer = cfg.FanoutConsumer
	}
	if cfg.DeliverConsumer != "" {
		opts.DeliverConsumer = cfg.DeliverConsumer
		opts.RetryConsumer = cfg.DeliverConsumer + "-retry"
		opts.QueuedConsumer = cfg.DeliverConsumer + "-queued"
		opts.JournalConsumer = cfg.DeliverConsumer + "-journal"
	}
	opts.Metrics = consumerMetrics
	if opts.JobSubjectPrefix == "" {
		opts.JobSubjectPrefix = transport.DefaultOptions().JobSubjectPrefix
	}
	if deps.Tune != nil {
		deps.Tune(&opts)
	}
	instance := deps.InstanceID
	if instance == "" {
		instance = instanceID()
	}
	st := store.New(deps.Pool, secrets)
	subs := app.NewSubscriptions(st)
	rates := app.NewRateLimiter()
	sender := transport.NewSender(transport.SenderOptions{Timeout: cfg.Timeout, AllowPrivate: cfg.AllowPrivate})
	order := app.NewOrder(st, transport.NewReleaser(deps.JS, opts), log,
		app.OrderOptions{ForgetAfter: app.OrderForgetAfter(cfg.RetrySchedule), Metrics: metrics})
	journal := transport.NewJournal(deps.JS, opts)
	d := transport.NewDispatcher(deps.JS, transport.Parts{
		Subscriptions: subs,
		Listener:      st,
		Events:        app.NewEventJobs(subs, log),
		Deliverer: app.NewDeliverer(st, subs, rates, sender, metrics, log,
			app.DeliveryOptions{Schedule: cfg.RetrySchedule, Order: order, Journal: journal}),
		Order:        order,
		Journal:      journal,
		JournalStore: st,
		Health: app.NewHealth(st, subs, rates, log, app.HealthOptions{
			Interval: cfg.HealthInterval, DisableAfter: cfg.DisableAfter, InstanceID: instance,
			LogRetention: cfg.LogRetention, Metrics: metrics,
		}),
		Metrics: metrics,
		Log:     log,
	}, opts)
	return &Service{Registry: reg, Metrics: metrics, Dispatcher: d}, nil
}

// Run runs the dispatcher until ctx is done, then drains it.
func (s *Service) Run(ctx context.Context) error { return s.Dispatcher.Run(ctx) }

// instanceID names this process in the heartbeat: host, pid and a random part.
func instanceID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8])
}
