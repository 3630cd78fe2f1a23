package mailtest

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/mailer/internal/app"
	"github.com/shipfile/shipfile/services/mailer/internal/service"
	"github.com/shipfile/shipfile/services/mailer/internal/transport"
)

// NATS starts a private JetStream server for the test, creates the production streams
// on it and returns a JetStream context and the server's URL.
func NATS(t testing.TB) (jetstream.JetStream, string) {
	t.Helper()
	_, url := servicetest.StartNATS(t)
	return Connect(t, url), url
}

// Connect connects to the NATS server at url for the test, creates the production
// streams there (unless they exist) and returns a JetStream context.
func Connect(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	js := servicetest.JetStream(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := events.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	return js
}

// Link is the magic link of the jobs NewJob makes.
const Link = "http://127.0.0.1:8080/p/Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1u"

// NewJob returns a mail job of kind to recipient with fresh job and package ids.
func NewJob(kind, recipient string) *eventsv1.MailJob {
	return &eventsv1.MailJob{
		JobId:          uuid.Must(uuid.NewV7()).String(),
		Kind:           kind,
		PackageId:      uuid.NewString(),
		Title:          "Q3 report",
		Note:           "Here are the figures.\nBest, Alice",
		RecipientEmail: recipient,
		RecipientName:  "Bob Builder",
		OwnerName:      "Alice Example",
		OwnerEmail:     "alice@example.com",
		MagicLink:      Link,
		ExpiresAt:      timestamppb.New(time.Date(2026, 11, 28, 16, 32, 5, 0, time.UTC)),
	}
}

// Publish puts job on SHIPFILE_MAIL the way the gateway's outbox relay does: subject
// shipfile.mail.<kind>, the job id as Nats-Msg-Id.
func Publish(t testing.TB, js jetstream.JetStream, job *eventsv1.MailJob) {
	t.Helper()
	msg, err := events.MailMessage(job)
	if err != nil {
		t.Fatal(err)
	}
	PublishRaw(t, js, msg.Subject, msg.ID, msg.Data)
}

// PublishRaw puts data on subject with msgID as Nats-Msg-Id.
func PublishRaw(t testing.TB, js jetstream.JetStream, subject, msgID string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, subject, data, jetstream.WithMsgID(msgID)); err != nil {
		t.Fatalf("publish on %s: %v", subject, err)
	}
}

// SMTPConfig returns a sender configuration that points at the sink, in plain SMTP.
func (s *Sink) SMTPConfig() transport.SMTPConfig {
	return transport.SMTPConfig{Host: s.Host, Port: s.Port, From: "shipfile@test.example", TLS: transport.TLSNone, Timeout: 5 * time.Second}
}

// Config configures a mailer instance of a test.
type Config struct {
	Pool *pgxpool.Pool
	JS   jetstream.JetStream
	SMTP transport.SMTPConfig
	// SMTPOptions adjust the sender (e.g. transport.WithRootCAs).
	SMTPOptions []transport.SMTPOption
	// Schedule defaults to five waits of 200ms.
	Schedule []time.Duration
	Workers  int           // default 2
	AckWait  time.Duration // default 10s
	// Tune adjusts the consumer options further.
	Tune func(*transport.Options)
	// Log defaults to the test's output.
	Log *slog.Logger
}

// Instance is a running mailer; Stop stops it gracefully and waits for it.
type Instance struct {
	Metrics  *app.Metrics
	Registry *prometheus.Registry
	*servicetest.Background
}

// Start runs the mail consumer of a mailer built like the binary's (service.New),
// stopped when the test ends.
func Start(t testing.TB, cfg Config) *Instance {
	t.Helper()
	if cfg.Schedule == nil {
		cfg.Schedule = Schedule(200*time.Millisecond, 5)
	}
	if cfg.Workers == 0 {
		cfg.Workers = 2
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	svc, err := service.New(context.Background(), service.Config{
		SMTP:            cfg.SMTP,
		RetrySchedule:   cfg.Schedule,
		Workers:         cfg.Workers,
		AckWait:         cfg.AckWait,
		ShutdownTimeout: 10 * time.Second,
	}, service.Deps{
		Pool:        cfg.Pool,
		JS:          cfg.JS,
		Log:         cfg.Log,
		SMTPOptions: cfg.SMTPOptions,
		App:         func(o *app.Options) { o.BusyDelay = 300 * time.Millisecond },
		Mail: func(o *transport.Options) {
			o.FetchWait = 500 * time.Millisecond
			o.StatsInterval = 200 * time.Millisecond
			if cfg.Tune != nil {
				cfg.Tune(o)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := svc.Mail.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	// The mail consumer only: the owner notifications have tests of their own.
	return &Instance{Metrics: svc.Metrics, Registry: svc.Registry, Background: servicetest.RunInBackground(t, "mailer", svc.Mail.Run)}
}

// Schedule returns n waits of d.
func Schedule(d time.Duration, n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = d
	}
	return s
}

// DeliveryRow is a mail_deliveries row.
type DeliveryRow struct {
	PackageID string
	Kind      string
	Recipient string
	State     string
	Attempts  int
	LastError string
	MessageID string
	SentAt    *time.Time
}

// Delivery returns a job's mail_deliveries row, false when there is none.
func Delivery(t testing.TB, pool *pgxpool.Pool, jobID string) (DeliveryRow, bool) {
	t.Helper()
	var r DeliveryRow
	err := pool.QueryRow(context.Background(), `
		SELECT package_id::text, kind, recipient_email, state, attempts, last_error, message_id, sent_at
		FROM mail_deliveries WHERE job_id = $1`, jobID).
		Scan(&r.PackageID, &r.Kind, &r.Recipient, &r.State, &r.Attempts, &r.LastError, &r.MessageID, &r.SentAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return DeliveryRow{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, true
}

// AuditRow is an audit_log row.
type AuditRow struct {
	Actor  string
	Action string
	Detail string
}

// Audit returns a package's audit entries, oldest first.
func Audit(t testing.TB, pool *pgxpool.Pool, packageID string) []AuditRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT actor, action, detail FROM audit_log WHERE package_id = $1 ORDER BY id`, packageID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[AuditRow])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Counter returns the value of a counter of reg with the given outcome label.
func Counter(t testing.TB, reg *prometheus.Registry, name, outcome string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// HistogramCount returns the number of observations of a histogram of reg.
func HistogramCount(t testing.TB, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// Gauge returns the value of a gauge of reg.
func Gauge(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// InsertPackage writes the package of job (and an owner for it) in state, as the
// gateway would have before queuing the job: the mailer sends only an active
// package's e-mail. The package expires a week from now, whatever the job's fixed
// expires_at says, so the tests do not start failing once that date has passed.
func InsertPackage(t testing.TB, pool *pgxpool.Pool, job *eventsv1.MailJob, state string) {
	t.Helper()
	ctx := context.Background()
	var owner int64
	err := pool.QueryRow(ctx, `INSERT INTO users (email, name, role) VALUES ($1, $2, 'regular') RETURNING id`,
		"owner-"+job.GetJobId()+"@example.com", job.GetOwnerName()).Scan(&owner)
	if err != nil {
		t.Fatalf("insert owner: %v", err)
	}
	_, err = pool.Exec(ctx, `
		INSERT INTO packages (id, owner_user_id, title, recipient_email, recipient_name, direction, state, ttl_days, note, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 7, $8, now() + interval '7 days')`,
		job.GetPackageId(), owner, job.GetTitle(), job.GetRecipientEmail(), job.GetRecipientName(), job.GetKind(), state,
		job.GetNote())
	if err != nil {
		t.Fatalf("insert package: %v", err)
	}
}
