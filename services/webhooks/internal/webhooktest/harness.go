package webhooktest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventstest"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/secretbox"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/service"
	"github.com/shipfile/shipfile/services/webhooks/internal/transport"
)

// Streams are a test's own events and jobs streams.
type Streams struct {
	// Options name the streams, subjects and (production-named) consumers.
	Options transport.Options
	// EventsPrefix starts the test's event subjects: EventsPrefix + "." + type.
	EventsPrefix string
	// JobsPrefix starts the test's job subjects: JobsPrefix + "." + hook id.
	JobsPrefix string
}

// NewStreams creates an events stream and a jobs stream like SHIPFILE_EVENTS and
// SHIPFILE_WEBHOOKS, under unique names, deleted when the test ends. The events stream
// takes the test's events (EventsPrefix.>) and due jobs (EventsPrefix + "_due.>").
func NewStreams(t testing.TB, js jetstream.JetStream) Streams {
	t.Helper()
	evStream, evPrefix := eventstest.Stream(t, js, events.EventsStream())
	cfg := evStream.CachedInfo().Config
	cfg.Subjects = append(cfg.Subjects, evPrefix+"_due.>")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatalf("add the due subjects to %s: %v", cfg.Name, err)
	}
	jobStream, jobPrefix := eventstest.Stream(t, js, events.WebhooksStream())
	opts := transport.DefaultOptions()
	opts.EventsStream = cfg.Name
	opts.EventsFilter = evPrefix + ".>"
	opts.DueSubjectPrefix = evPrefix + "_due."
	opts.JobsStream = jobStream.CachedInfo().Config.Name
	opts.JobSubjectPrefix = jobPrefix + "."
	return Streams{Options: opts, EventsPrefix: evPrefix, JobsPrefix: jobPrefix}
}

// Publish puts env on the test's events stream, with its event id as Nats-Msg-Id.
func (s Streams) Publish(t testing.TB, js jetstream.JetStream, env *eventsv1.Envelope) {
	t.Helper()
	b, err := events.MarshalEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	s.PublishRaw(t, js, env.GetType(), env.GetEventId(), b)
}

// PublishRaw puts data on the test's events stream under subject EventsPrefix.typ.
func (s Streams) PublishRaw(t testing.TB, js jetstream.JetStream, typ, msgID string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, s.EventsPrefix+"."+typ, data, jetstream.WithMsgID(msgID)); err != nil {
		t.Fatalf("publish %s: %v", typ, err)
	}
}

// Config configures a dispatcher instance of a test.
type Config struct {
	Pool    *pgxpool.Pool
	JS      jetstream.JetStream
	Streams Streams
	// Schedule defaults to seven waits of 200ms.
	Schedule     []time.Duration
	Timeout      time.Duration // default 2s
	AllowPrivate bool
	DisableAfter time.Duration
	// HealthInterval is the period of the health pass and heartbeat (default 100ms).
	HealthInterval time.Duration
	Workers        int // default 64
	// Tune adjusts the transport options further.
	Tune func(*transport.Options)
	// Log defaults to the test's output.
	Log *slog.Logger
}

// Instance is a running dispatcher; Stop stops it gracefully and waits for it.
type Instance struct {
	Metrics  *app.Metrics
	Registry *prometheus.Registry
	*servicetest.Background
}

// Start runs a dispatcher built like the binary's (service.New), stopped when the
// test ends.
func Start(t testing.TB, cfg Config) *Instance {
	t.Helper()
	if cfg.Schedule == nil {
		cfg.Schedule = Schedule(200*time.Millisecond, 7)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.HealthInterval == 0 {
		cfg.HealthInterval = 100 * time.Millisecond
	}
	if cfg.Workers == 0 {
		cfg.Workers = 64
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	svc, err := service.New(context.Background(), service.Config{
		Secrets:         secretbox.Config{Key: servicetest.SecretKey},
		AllowPrivate:    cfg.AllowPrivate,
		RetrySchedule:   cfg.Schedule,
		Timeout:         cfg.Timeout,
		Workers:         cfg.Workers,
		DisableAfter:    cfg.DisableAfter,
		HealthInterval:  cfg.HealthInterval,
		AckWait:         cfg.Timeout + 2*time.Second,
		ShutdownTimeout: 10 * time.Second,
	}, service.Deps{
		Pool:       cfg.Pool,
		JS:         cfg.JS,
		Log:        cfg.Log,
		Options:    cfg.Streams.Options,
		InstanceID: uuid.NewString(),
		Tune: func(o *transport.Options) {
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
	// Consumers exist once Start returns, so events published next are not missed.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, _, err := svc.Dispatcher.EnsureConsumers(ctx); err != nil {
		t.Fatal(err)
	}
	return &Instance{Metrics: svc.Metrics, Registry: svc.Registry, Background: servicetest.RunInBackground(t, "dispatcher", svc.Run)}
}

// Schedule returns n waits of d.
func Schedule(d time.Duration, n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = d
	}
	return s
}

// Subscription is a webhook_subscriptions row to insert.
type Subscription struct {
	URL    string
	Events []string // default: every event type (NULL)
	// Secret and PreviousSecret are stored sealed under servicetest.SecretKey, as the
	// gateway stores them.
	Secret              string
	MaxInFlight         int // default 16
	RateLimit           int // default none
	Inactive            bool
	PreviousSecret      string
	PreviousSecretUntil time.Time
	// Ordering is "none" (default) or "package".
	Ordering string
}

// InsertSubscription inserts s and returns its id.
func InsertSubscription(t testing.TB, pool *pgxpool.Pool, s Subscription) int64 {
	t.Helper()
	if s.MaxInFlight == 0 {
		s.MaxInFlight = 16
	}
	var rate *int
	if s.RateLimit > 0 {
		rate = &s.RateLimit
	}
	ring := servicetest.Keyring(t)
	seal := func(v string) string {
		sealed, err := ring.Seal(v)
		if err != nil {
			t.Fatal(err)
		}
		return sealed
	}
	secret := seal(s.Secret)
	var prev *string
	var until *time.Time
	if s.PreviousSecret != "" {
		sealed := seal(s.PreviousSecret)
		prev, until = &sealed, &s.PreviousSecretUntil
	}
	if s.Ordering == "" {
		s.Ordering = app.OrderingNone
	}
	var id int64
	err := pool.QueryRow(context.Background(), `
		INSERT INTO webhook_subscriptions (url, events, secret, previous_secret, previous_secret_until, active, max_in_flight, rate_limit, ordering)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
		s.URL, s.Events, secret, prev, until, !s.Inactive, s.MaxInFlight, rate, s.Ordering).Scan(&id)
	if err != nil {
		t.Fatalf("insert subscription: %v", err)
	}
	return id
}

// DeliveryRow is a webhook_deliveries row.
type DeliveryRow struct {
	ID             string
	SubscriptionID int64
	EventID        string
	Event          string
	Body           []byte
	Status         string
	Attempts       int
	RoundAttempts  int
	LastStatusCode *int
	LastError      *string
}

// Deliveries returns the deliveries of a subscription, oldest first.
func Deliveries(t testing.TB, pool *pgxpool.Pool, hookID int64) []DeliveryRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT id::text, subscription_id, event_id, event, body, status, attempts, round_attempts, last_status_code, last_error
		FROM webhook_deliveries WHERE subscription_id = $1 ORDER BY created_at, id`, hookID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DeliveryRow])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// AttemptRow is a webhook_attempts row.
type AttemptRow struct {
	Attempt         int
	StatusCode      *int
	Error           *string
	DurationMS      int
	ResponseExcerpt *string
	CreatedAt       time.Time
}

// Attempts returns the attempts of a delivery in order.
func Attempts(t testing.TB, pool *pgxpool.Pool, deliveryID string) []AttemptRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT attempt, status_code, error, duration_ms, response_excerpt, created_at
		FROM webhook_attempts WHERE delivery_id = $1 ORDER BY id`, deliveryID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[AttemptRow])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// SubscriptionRow is the health part of a webhook_subscriptions row.
type SubscriptionRow struct {
	Active         bool
	DisabledReason *string
	DisabledAt     *time.Time
	FailingSince   *time.Time
	LastSuccessAt  *time.Time
}

// SubscriptionState returns the health of a subscription.
func SubscriptionState(t testing.TB, pool *pgxpool.Pool, hookID int64) SubscriptionRow {
	t.Helper()
	var s SubscriptionRow
	err := pool.QueryRow(context.Background(), `
		SELECT active, disabled_reason, disabled_at, failing_since, last_success_at
		FROM webhook_subscriptions WHERE id = $1`, hookID).
		Scan(&s.Active, &s.DisabledReason, &s.DisabledAt, &s.FailingSince, &s.LastSuccessAt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Eventually polls cond every 50ms until it holds, failing the test after timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
