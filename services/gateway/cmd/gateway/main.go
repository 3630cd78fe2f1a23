// Command gateway serves shipfile's REST API, docs, web pages and recipient links.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/outbox"
	"github.com/shipfile/shipfile/pkg/secretbox"
	"github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/httpapi"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/web"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// Config is the gateway's configuration.
type Config struct {
	HTTPAddr        string `env:"SHIPFILE_HTTP_ADDR" default:"127.0.0.1:8080" help:"address the API listens on"`
	PublicURL       string `env:"SHIPFILE_PUBLIC_URL" default:"http://127.0.0.1:8080" help:"public base URL (magic links)"`
	Database        database.Config
	NATS            bus.Config
	S3              storage.Config
	Secrets         secretbox.Config
	MaxJSONBytes    int64         `env:"SHIPFILE_MAX_JSON_BYTES" default:"1048576" help:"largest accepted JSON request body"`
	MaxFileSize     int64         `env:"SHIPFILE_MAX_FILE_SIZE" default:"10737418240" help:"largest accepted file, in bytes (10 GiB)"`
	MaxFiles        int           `env:"SHIPFILE_MAX_FILES" default:"500" help:"most files in one package"`
	UploadPartSize  int64         `env:"SHIPFILE_UPLOAD_PART_SIZE" default:"16777216" help:"multipart part size of uploads to S3, in bytes; bounds memory per upload (min 5 MiB)"`
	ResumeWindow    time.Duration `env:"SHIPFILE_UPLOAD_RESUME_WINDOW" default:"24h" help:"an unfinished resumable (tus) upload expires this long after its last PATCH"`
	UploadLease     time.Duration `env:"SHIPFILE_UPLOAD_LOCK_LEASE" default:"30s" help:"how long a tus PATCH's hold on its upload lasts without renewal (what a crashed gateway's PATCH blocks)"`
	UploadSweep     time.Duration `env:"SHIPFILE_UPLOAD_SWEEP_INTERVAL" default:"1m" help:"how often the gateway ends expired or orphaned tus uploads"`
	RateLimit       int           `env:"SHIPFILE_RATE_LIMIT" default:"50" help:"requests per second per API token (0 disables)"`
	RateBurst       int           `env:"SHIPFILE_RATE_BURST" default:"100" help:"burst of requests per API token"`
	TrustedProxies  string        `env:"SHIPFILE_TRUSTED_PROXIES" default:"" help:"comma-separated proxy CIDRs whose X-Forwarded-For is trusted"`
	WebhookPrivate  bool          `env:"SHIPFILE_WEBHOOK_ALLOW_PRIVATE" default:"false" help:"accept webhook URLs whose host is localhost or a loopback, private or link-local address"`
	ShutdownTimeout time.Duration `env:"SHIPFILE_SHUTDOWN_TIMEOUT" default:"20s" help:"grace period for in-flight requests on SIGTERM"`
	Web             WebConfig
	Edge            EdgeConfig
}

// EdgeConfig bounds what one client can hold of the gateway (SPEC "Hostile clients").
type EdgeConfig struct {
	OpsAddr             string        `env:"SHIPFILE_OPS_ADDR" default:"127.0.0.1:8084" help:"address of /readyz, /metrics and /healthz (never the public address)"`
	HashConcurrency     int           `env:"SHIPFILE_HASH_CONCURRENCY" default:"0" help:"password hashes (argon2id, 19 MiB each) at once; 0: the CPU count"`
	UploadMaxConcurrent int           `env:"SHIPFILE_UPLOAD_MAX_CONCURRENT" default:"32" help:"uploads in flight on this gateway (more: 503)"`
	UploadPerClient     int           `env:"SHIPFILE_UPLOAD_MAX_PER_CLIENT" default:"4" help:"uploads in flight per token, link or browser user (more: 429)"`
	UploadMinRate       int64         `env:"SHIPFILE_UPLOAD_MIN_RATE" default:"32768" help:"bytes a second an upload body must bring over every rate window, else it is cut off (0: no minimum)"`
	UploadRateWindow    time.Duration `env:"SHIPFILE_UPLOAD_RATE_WINDOW" default:"30s" help:"window over which SHIPFILE_UPLOAD_MIN_RATE is counted"`
	HTTPIdleTimeout     time.Duration `env:"SHIPFILE_HTTP_IDLE_TIMEOUT" default:"60s" help:"an idle keep-alive connection is closed after this"`
	LinkRate            int           `env:"SHIPFILE_LINK_RATE" default:"20" help:"requests a second per client IP to link routes (/p/..., /api/v1/links/...), across instances (0 disables)"`
	LinkBurst           int           `env:"SHIPFILE_LINK_BURST" default:"40" help:"burst of requests per client IP to link routes"`
}

// WebConfig is the web UI's share of the gateway configuration.
type WebConfig struct {
	SessionLifetime time.Duration `env:"SHIPFILE_SESSION_LIFETIME" default:"168h" help:"longest a web UI sign-in lasts, however active"`
	SessionIdle     time.Duration `env:"SHIPFILE_SESSION_IDLE_TIMEOUT" default:"12h" help:"a web UI sign-in unused for this long ends"`
	CookieSecure    string        `env:"SHIPFILE_COOKIE_SECURE" default:"auto" help:"Secure cookies: auto (when SHIPFILE_PUBLIC_URL is https), true or false"`
	LoginFailures   int           `env:"SHIPFILE_LOGIN_MAX_FAILURES" default:"5" help:"failed sign-ins per e-mail or IP address before a lockout"`
	LoginLockout    time.Duration `env:"SHIPFILE_LOGIN_LOCKOUT" default:"15m" help:"window of counted failed sign-ins, and how long a lockout lasts"`
}

// secureCookies resolves SHIPFILE_COOKIE_SECURE.
func (c WebConfig) secureCookies(publicURL string) (bool, error) {
	switch strings.ToLower(c.CookieSecure) {
	case "auto", "":
		return strings.HasPrefix(strings.ToLower(publicURL), "https://"), nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("SHIPFILE_COOKIE_SECURE must be auto, true or false")
}

func main() { service.Main("gateway", run) }

func run(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg Config
	if err := config.Parse("gateway", args, os.Stdout, &cfg); err != nil {
		return err
	}
	if err := cfg.NATS.Validate(); err != nil {
		return err
	}
	secrets, err := cfg.Secrets.Keyring()
	if err != nil {
		return err
	}
	log.Info("starting", "config", config.LogValue(&cfg))

	if err := migrations.Up(ctx, cfg.Database.URL); err != nil {
		return err
	}
	pool, err := database.Open(ctx, cfg.Database.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := events.Connect(ctx, cfg.NATS, "shipfile-gateway")
	if err != nil {
		return err
	}
	defer nc.Close()
	objects, err := storage.Open(ctx, cfg.S3)
	if err != nil {
		return err
	}

	if cfg.UploadPartSize < 5<<20 {
		return fmt.Errorf("SHIPFILE_UPLOAD_PART_SIZE must be at least 5 MiB")
	}
	secure, err := cfg.Web.secureCookies(cfg.PublicURL)
	if err != nil {
		return err
	}
	if cfg.Web.SessionLifetime <= 0 || cfg.Web.SessionIdle <= 0 || cfg.Web.LoginFailures < 1 || cfg.Web.LoginLockout <= 0 {
		return fmt.Errorf("SHIPFILE_SESSION_LIFETIME, SHIPFILE_SESSION_IDLE_TIMEOUT, SHIPFILE_LOGIN_MAX_FAILURES and SHIPFILE_LOGIN_LOCKOUT must be positive")
	}

	if cfg.Edge.UploadRateWindow <= 0 || cfg.Edge.HTTPIdleTimeout <= 0 || cfg.Edge.UploadMinRate < 0 || cfg.Edge.LinkRate < 0 {
		return fmt.Errorf("SHIPFILE_UPLOAD_RATE_WINDOW and SHIPFILE_HTTP_IDLE_TIMEOUT must be positive, SHIPFILE_UPLOAD_MIN_RATE and SHIPFILE_LINK_RATE not negative")
	}
	// The ops listener is bound first, so an address in use fails the start.
	opsLn, err := net.Listen("tcp", cfg.Edge.OpsAddr)
	if err != nil {
		return fmt.Errorf("SHIPFILE_OPS_ADDR: %w", err)
	}
	defer opsLn.Close()

	reg := ops.NewRegistry()
	// The relay publishes committed outbox rows; the store wakes it after each commit
	// that wrote some. It stops after the HTTP server has drained, so the events of the
	// last requests go out too; rows it leaves are published by another instance or at
	// the next start.
	relay := outbox.NewRelay(pool, nc.JS, outbox.Options{Log: log, Registerer: reg})
	db := store.NewPostgres(pool, store.WithOutboxWake(relay.Wake))
	if err := resealSecrets(ctx, log, db, secrets); err != nil {
		return err
	}
	// Every password of this gateway (sign-in, setup, users, link passwords) is hashed
	// through one Hasher: at most SHIPFILE_HASH_CONCURRENCY argon2id at once.
	hasher := app.NewHasher(cfg.Edge.HashConcurrency, app.DefaultHashWait)
	// Token look-ups are cached while the change feed (LISTEN on the triggers'
	// channel) is current; last_used_at is written in batches.
	tokenCache := app.NewTokenCache(app.DefaultTokenCacheTTL, app.DefaultTokenFeedWindow)
	tokenUsage := app.NewTokenUsage(db, app.DefaultTokenUsageInterval)
	identity := app.NewIdentity(db, app.WithTokenCache(tokenCache), app.WithTokenUsage(tokenUsage), app.WithHasher(hasher))
	linkRate := app.NewLinkRate(db, float64(cfg.Edge.LinkRate), cfg.Edge.LinkBurst)
	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	go db.FollowAuthChanges(feedCtx, tokenCache, log)
	// The usage writer stops after the HTTP server has drained and writes what is left.
	usageCtx, stopUsage := context.WithCancel(context.WithoutCancel(ctx))
	usageDone := make(chan struct{})
	go func() {
		defer close(usageDone)
		tokenUsage.Run(usageCtx, func(err error) { log.Warn("write tokens' last_used_at", "err", err) })
	}()
	defer func() {
		stopUsage()
		<-usageDone
	}()
	if cfg.ResumeWindow <= 0 || cfg.UploadLease <= 0 || cfg.UploadSweep <= 0 {
		return fmt.Errorf("SHIPFILE_UPLOAD_RESUME_WINDOW, SHIPFILE_UPLOAD_LOCK_LEASE and SHIPFILE_UPLOAD_SWEEP_INTERVAL must be positive")
	}
	objectStore := store.NewObjects(objects, uint64(cfg.UploadPartSize))
	packages := app.NewPackages(db, objectStore,
		app.Limits{MaxFileSize: cfg.MaxFileSize, MaxFiles: cfg.MaxFiles}, cfg.PublicURL)
	packages.UseHasher(hasher)
	resumable := app.NewResumable(packages, db, objectStore,
		app.TusConfig{ResumeWindow: cfg.ResumeWindow, Lease: cfg.UploadLease}, log)
	sweepCtx, stopSweep := context.WithCancel(ctx)
	sweepDone := make(chan struct{})
	go func() { defer close(sweepDone); resumable.RunSweeper(sweepCtx, cfg.UploadSweep) }()
	defer func() { stopSweep(); <-sweepDone }()
	webhooks := app.NewWebhooks(db, secrets, cfg.WebhookPrivate)
	sessions := app.NewSessions(db, identity, app.SessionConfig{
		Lifetime: cfg.Web.SessionLifetime, IdleTimeout: cfg.Web.SessionIdle,
		MaxFailures: cfg.Web.LoginFailures, Lockout: cfg.Web.LoginLockout,
	})
	ui, err := web.New(web.Deps{
		Log: log, Identity: identity, Sessions: sessions, Packages: packages, Webhooks: webhooks, LinkRate: linkRate,
		Config: web.Config{SecureCookies: secure, SessionLifetime: cfg.Web.SessionLifetime, MaxFileSize: cfg.MaxFileSize},
	})
	if err != nil {
		return fmt.Errorf("web UI: %w", err)
	}
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(relayCtx) }()
	defer func() {
		stopRelay()
		if err := <-relayDone; err != nil && !errors.Is(err, context.Canceled) {
			log.Error("outbox relay", "err", err)
		}
	}()
	router, err := httpapi.New(httpapi.Deps{
		Log:       log,
		Identity:  identity,
		Packages:  packages,
		Webhooks:  webhooks,
		Resumable: resumable,
		Registry:  reg,
		Pages:     ui,
		LinkRate:  linkRate,
		Config: httpapi.Config{
			MaxJSONBytes:   cfg.MaxJSONBytes,
			MaxFileSize:    cfg.MaxFileSize,
			RatePerSecond:  float64(cfg.RateLimit),
			RateBurst:      cfg.RateBurst,
			TrustedProxies: splitList(cfg.TrustedProxies),
			Uploads: httpapi.UploadLimits{
				MaxConcurrent: cfg.Edge.UploadMaxConcurrent, PerClient: cfg.Edge.UploadPerClient,
				MinRate: cfg.Edge.UploadMinRate, RateWindow: cfg.Edge.UploadRateWindow,
			},
		},
	})
	if err != nil {
		return fmt.Errorf("router: %w", err)
	}
	opsHandler := ops.Handler(reg,
		ops.Check{Name: "postgres", Fn: pool.Ping},
		ops.Check{Name: "nats", Fn: nc.Check},
		ops.Check{Name: "s3", Fn: objects.Check},
	)
	opsCtx, stopOps := context.WithCancel(context.WithoutCancel(ctx))
	opsDone := make(chan error, 1)
	go func() { opsDone <- ops.ServeListener(opsCtx, log, opsLn, opsHandler, time.Second) }()
	err = ops.Serve(ctx, log, cfg.HTTPAddr, router, cfg.ShutdownTimeout, ops.WithIdleTimeout(cfg.Edge.HTTPIdleTimeout))
	// The ops endpoints stay up while the public server drains, then stop.
	stopOps()
	if opsErr := <-opsDone; opsErr != nil && err == nil {
		err = fmt.Errorf("ops listener: %w", opsErr)
	}
	log.Info("stopped")
	return err
}

// resealSecrets seals the webhook secrets stored in clear or under
// SHIPFILE_SECRET_KEY_PREVIOUS under SHIPFILE_SECRET_KEY.
func resealSecrets(ctx context.Context, log *slog.Logger, db *store.Postgres, secrets *secretbox.Keyring) error {
	rep, err := db.ResealWebhookSecrets(ctx, secrets)
	if err != nil {
		return err
	}
	// The key id names the key (docs/OPERATIONS.md, rotation) and reveals nothing of it.
	log.Info("webhook secrets sealed under SHIPFILE_SECRET_KEY", "key_id", secrets.CurrentID(), "resealed", rep.Resealed)
	if len(rep.Unknown) > 0 {
		log.Error("webhook secrets sealed under a key that is neither SHIPFILE_SECRET_KEY nor SHIPFILE_SECRET_KEY_PREVIOUS: "+
			"their deliveries fail until that key is set as SHIPFILE_SECRET_KEY_PREVIOUS (or the secrets are rotated)",
			"subscriptions", rep.Unknown)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
