package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/mailer/internal/app"
	"github.com/shipfile/shipfile/services/mailer/internal/mailtest"
	"github.com/shipfile/shipfile/services/mailer/internal/transport"
)

// env points the service at a fresh database, a private NATS server and a sink.
func env(t *testing.T) (sink *mailtest.Sink, addr, natsURL string, pool *pgxpool.Pool) {
	t.Helper()
	sink = mailtest.NewSink(t)
	_, natsURL = mailtest.NATS(t)
	addr = servicetest.FreeAddr(t)
	pool, dbURL := schematest.Pool(t)
	t.Setenv("SHIPFILE_MAILER_ADDR", addr)
	t.Setenv("SHIPFILE_DATABASE_URL", dbURL)
	t.Setenv("SHIPFILE_NATS_URL", natsURL)
	t.Setenv("SHIPFILE_SMTP_HOST", sink.Host)
	t.Setenv("SHIPFILE_SMTP_PORT", strconv.Itoa(sink.Port))
	return sink, addr, natsURL, pool
}

func TestLifecycle(t *testing.T) {
	_, addr, _, _ := env(t)
	servicetest.Lifecycle(t, run, addr)
}

// The real run, configured by the environment, sends a job's e-mail and reports it in
// /metrics; /readyz names the SMTP server when it is gone.
func TestRunSendsAndReportsSMTPReadiness(t *testing.T) {
	sink, addr, natsURL, pool := env(t)
	t.Setenv("SHIPFILE_SMTP_FROM", "Shipfile <noreply@test.example>")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("run: %v", err)
		}
	})
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	servicetest.WaitFor(t, 30*time.Second, "ready", func() bool { code, _ := get("/readyz"); return code == http.StatusOK })

	js := mailtest.Connect(t, natsURL)
	job := mailtest.NewJob(app.KindOutbound, "bob@example.com")
	mailtest.InsertPackage(t, pool, job, "active")
	mailtest.Publish(t, js, job)
	m := sink.WaitN(t, 1, 20*time.Second)[0]
	if from := m.Parse(t).Header.Get("From"); from != `"Shipfile" <noreply@test.example>` {
		t.Errorf("From %q: the configured name must win", from)
	}
	servicetest.WaitFor(t, 10*time.Second, "metrics", func() bool {
		_, body := get("/metrics")
		return strings.Contains(body, `shipfile_mailer_jobs_total{outcome="sent"} 1`) &&
			strings.Contains(body, "shipfile_mailer_send_duration_seconds_count 1") &&
			strings.Contains(body, "shipfile_mailer_queue_depth 0")
	})

	sink.Down()
	code, body := get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"smtp"`) || !strings.Contains(body, `"postgres":"ok"`) {
		t.Errorf("/readyz with the SMTP server down: %d %s", code, body)
	}
}

func TestUsageListsEveryVariable(t *testing.T) {
	var buf bytes.Buffer
	config.Usage(&buf, "mailer", &Config{})
	for _, v := range []string{"SHIPFILE_MAILER_ADDR", "SHIPFILE_DATABASE_URL", "SHIPFILE_NATS_URL", "SHIPFILE_STREAM_REPLICAS",
		"SHIPFILE_SMTP_HOST", "SHIPFILE_SMTP_PORT", "SHIPFILE_SMTP_FROM", "SHIPFILE_SMTP_USERNAME", "SHIPFILE_SMTP_PASSWORD",
		"SHIPFILE_SMTP_TLS", "SHIPFILE_SMTP_TIMEOUT", "SHIPFILE_MAIL_RETRY_SCHEDULE", "SHIPFILE_MAILER_WORKERS",
		"SHIPFILE_MAIL_ACK_WAIT", "SHIPFILE_MAIL_MAX_ACK_PENDING", "SHIPFILE_SHUTDOWN_TIMEOUT",
		"SHIPFILE_PUBLIC_URL", "SHIPFILE_NOTIFY_QUIET", "SHIPFILE_NOTIFY_POLL"} {
		if !strings.Contains(buf.String(), v) {
			t.Errorf("--help lacks %s", v)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		return Config{
			SMTP:    transport.SMTPConfig{Host: "127.0.0.1", Port: 1025, From: "shipfile@localhost", TLS: "none", Timeout: 30 * time.Second},
			NATS:    bus.Config{URL: "nats://127.0.0.1:4222", StreamReplicas: 1},
			Workers: 4, MaxAckPending: 100, RetrySchedule: []time.Duration{time.Second},
			NotifyQuiet: time.Minute, NotifyPoll: time.Second,
		}
	}
	c := base()
	if err := c.Validate(); err != nil || c.AckWait != 40*time.Second {
		t.Fatalf("defaults: %v, AckWait %s (want SMTP timeout + 10s)", err, c.AckWait)
	}
	for name, c := range map[string]struct {
		mod  func(*Config)
		want string
	}{
		"unknown TLS mode":  {func(c *Config) { c.SMTP.TLS = "sometimes" }, "SHIPFILE_SMTP_TLS"},
		"bad sender":        {func(c *Config) { c.SMTP.From = "not an address" }, "SHIPFILE_SMTP_FROM"},
		"bad port":          {func(c *Config) { c.SMTP.Port = 0 }, "SHIPFILE_SMTP_PORT"},
		"no timeout":        {func(c *Config) { c.SMTP.Timeout = 0 }, "SHIPFILE_SMTP_TIMEOUT"},
		"no quiet time":     {func(c *Config) { c.NotifyQuiet = 0 }, "SHIPFILE_NOTIFY_QUIET"},
		"no workers":        {func(c *Config) { c.Workers = 0 }, "SHIPFILE_MAILER_WORKERS"},
		"no ack pending":    {func(c *Config) { c.MaxAckPending = 0 }, "SHIPFILE_MAIL_MAX_ACK_PENDING"},
		"negative wait":     {func(c *Config) { c.RetrySchedule = []time.Duration{-time.Second} }, "SHIPFILE_MAIL_RETRY_SCHEDULE"},
		"tiny ack wait":     {func(c *Config) { c.AckWait = time.Millisecond }, "SHIPFILE_MAIL_ACK_WAIT"},
		"too many replicas": {func(c *Config) { c.NATS.StreamReplicas = 7 }, "SHIPFILE_STREAM_REPLICAS"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := base()
			c.mod(&cfg)
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("validate = %v, want an error naming %s", err, c.want)
			}
		})
	}
}

func TestRejectsUnknownTLSMode(t *testing.T) {
	t.Setenv("SHIPFILE_SMTP_TLS", "sometimes")
	if err := run(t.Context(), nil, nil); err == nil || !strings.Contains(err.Error(), "SHIPFILE_SMTP_TLS") {
		t.Fatalf("run = %v, want a SHIPFILE_SMTP_TLS error", err)
	}
}
