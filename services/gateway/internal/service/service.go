// Package service builds the gateway's whole graph from its configuration (store →
// app → transport: the REST API, the web UI and the link routes on one router, and
// the background work beside them): the binary's run and the test harnesses call New,
// so they run what production runs.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/outbox"
	"github.com/shipfile/shipfile/pkg/secretbox"
	pkgservice "github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
	"github.com/shipfile/shipfile/services/gateway/internal/app/policies"
	"github.com/shipfile/shipfile/services/gateway/internal/app/previews"
	"github.com/shipfile/shipfile/services/gateway/internal/app/transfers"
	"github.com/shipfile/shipfile/services/gateway/internal/app/webhookadmin"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
	"github.com/shipfile/shipfile/services/gateway/internal/store/auditdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/identitydb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/linksdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/policiesdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/previewsdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/transfersdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/webhookadmindb"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/httpapi"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/previewconsumer"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/web"
)

// Config is the gateway's configuration.
type Config struct {
	HTTPAddr        string `env:"SHIPFILE_HTTP_ADDR" default:"127.0.0.1:8080" help:"address the API listens on"`
	PublicURL       string `env:"SHIPFILE_PUBLIC_URL" default:"http://127.0.0.1:8080" help:"public base URL (magic links)"`
	Database        database.Config
	DatabaseConns   int `env:"SHIPFILE_DATABASE_CONNS" default:"16" help:"least size of the gateway's PostgreSQL pool (a pool_max_conns in the URL may raise it): concurrent requests' commits share PostgreSQL's WAL flushes, and concurrent package creations share round trips on up to half of it"`
	NATS            bus.Config
	S3              storage.Config
	Secrets         secretbox.Config
	MaxJSONBytes    int64         `env:"SHIPFILE_MAX_JSON_BYTES" default:"1048576" help:"largest accepted JSON request body"`
	MaxFileSize     int64         `env:"SHIPFILE_MAX_FILE_SIZE" default:"10737418240" help:"largest accepted file, in bytes (10 GiB)"`
	MaxFiles        int           `env:"SHIPFILE_MAX_FILES" default:"500" help:"most files in one package"`
	StorageCap      int64         `env:"SHIPFILE_STORAGE_CAP" default:"0" help:"bytes all users' packages and uploads under way may hold together (0: no bound); per-user limits are policies (docs/POLICIES.md)"`
	UploadPartSize  int64         `env:"SHIPFILE_UPLOAD_PART_SIZE" default:"16777216" help:"multipart part size of uploads to S3, in bytes; bounds memory per upload (min 5 MiB)"`
	ResumeWindow    time.Duration `env:"SHIPFILE_UPLOAD_RESUME_WINDOW" default:"24h" help:"an unfinished resumable (tus) upload expires this long after its last PATCH"`
	UploadLease     time.Duration `env:"SHIPFILE_UPLOAD_LOCK_LEASE" default:"30s" help:"how long a tus PATCH's hold on its upload lasts without renewal (what a crashed gateway's PATCH blocks)"`
	UploadLockWait  time.Duration `env:"SHIPFILE_UPLOAD_LOCK_WAIT" default:"5s" help:"how long a tus request waits for a running PATCH of its upload, asked to let go, before answering 423 (a holder that cannot be reached)"`
	UploadSweep     time.Duration `env:"SHIPFILE_UPLOAD_SWEEP_INTERVAL" default:"1m" help:"how often the gateway ends expired or orphaned tus uploads"`
	RateLimit       int           `env:"SHIPFILE_RATE_LIMIT" default:"50" help:"requests per second per API token (0 disables)"`
	RateBurst       int           `env:"SHIPFILE_RATE_BURST" default:"100" help:"burst of requests per API token"`
	TrustedProxies  string        `env:"SHIPFILE_TRUSTED_PROXIES" default:"" help:"comma-separated proxy CIDRs whose X-Forwarded-For is trusted"`
	WebhookPrivate  bool          `env:"SHIPFILE_WEBHOOK_ALLOW_PRIVATE" default:"false" help:"accept webhook URLs whose host is localhost or a loopback, private or link-local address"`
	ShutdownTimeout time.Duration `env:"SHIPFILE_SHUTDOWN_TIMEOUT" default:"20s" help:"grace period for in-flight requests on SIGTERM"`
	Web             WebConfig
	Edge            EdgeConfig
	OIDC            OIDCConfig
	Scan            ScanConfig
}

// OIDCConfig is the organization's OpenID provider (docs/WEB-UI.md, "Signing in with
// the organization's accounts").
type OIDCConfig struct {
	Issuer        string        `env:"SHIPFILE_OIDC_ISSUER" default:"" help:"OpenID provider's issuer URL (discovery at {issuer}/.well-known/openid-configuration); unset: no sign-in through a provider"`
	ClientID      string        `env:"SHIPFILE_OIDC_CLIENT_ID" default:"" help:"client id registered at the provider (redirect URI {SHIPFILE_PUBLIC_URL}/auth/oidc/callback)"`
	ClientSecret  string        `env:"SHIPFILE_OIDC_CLIENT_SECRET" default:"" secret:"true" help:"client secret registered at the provider"`
	Name          string        `env:"SHIPFILE_OIDC_NAME" default:"SSO" help:"the sign-in button's label: Sign in with {name}"`
	Scopes        string        `env:"SHIPFILE_OIDC_SCOPES" default:"openid email profile" help:"scopes asked of the provider (space-separated)"`
	GroupsClaim   string        `env:"SHIPFILE_OIDC_GROUPS_CLAIM" default:"groups" help:"claim of the ID token (or userinfo) that lists the user's groups"`
	AdminGroups   string        `env:"SHIPFILE_OIDC_ADMIN_GROUPS" default:"" help:"comma-separated groups whose members are admins, the others regular, set at every sign-in; empty: roles are left to admins"`
	AllowedGroups string        `env:"SHIPFILE_OIDC_ALLOWED_GROUPS" default:"" help:"comma-separated groups; when set, only their members may sign in"`
	Recheck       time.Duration `env:"SHIPFILE_OIDC_RECHECK" default:"15m" help:"how often a session begun through the provider is checked again there (refresh token): a refusal or leaving the allowed groups ends it, a role change from the groups applies at once"`
	PasswordLogin string        `env:"SHIPFILE_PASSWORD_LOGIN" default:"true" help:"sign-in by e-mail and password in the web UI: true or false (the form is hidden and POST /login refused)"`
}

// PasswordLoginOff reports SHIPFILE_PASSWORD_LOGIN=false (empty: on).
func (c OIDCConfig) PasswordLoginOff() bool {
	return strings.EqualFold(strings.TrimSpace(c.PasswordLogin), "false")
}

// Web returns the web UI's share of the provider's settings; nil when no issuer is set.
func (c OIDCConfig) Web(publicURL string) *web.OIDCConfig {
	if c.Issuer == "" {
		return nil
	}
	return &web.OIDCConfig{
		Issuer: c.Issuer, ClientID: c.ClientID, ClientSecret: c.ClientSecret, Name: c.Name,
		Scopes: strings.Fields(c.Scopes), GroupsClaim: c.GroupsClaim, PublicURL: publicURL,
		Policy: identity.OIDCPolicy{AdminGroups: splitList(c.AdminGroups), AllowedGroups: splitList(c.AllowedGroups)},
	}
}

// ScanConfig is what the gateway needs of malware scanning (docs/SCANNING.md):
// the mode its link routes follow. The scanner service does the scanning.
type ScanConfig struct {
	Mode      string `env:"SHIPFILE_SCAN" default:"" help:"off, flag (files served while pending) or block (through the link a file is served once clean); default: block when SHIPFILE_CLAMD_ADDR is set, else off"`
	ClamdAddr string `env:"SHIPFILE_CLAMD_ADDR" default:"" help:"clamd's address (the scanner's); the gateway only reads whether it is set, for SHIPFILE_SCAN's default"`
}

// EdgeConfig bounds what one client can hold of the gateway (docs/API.md, "Hostile clients").
type EdgeConfig struct {
	OpsAddr             string        `env:"SHIPFILE_OPS_ADDR" default:"127.0.0.1:8084" help:"address of /readyz, /metrics and /healthz (never the public address)"`
	HashConcurrency     int           `env:"SHIPFILE_HASH_CONCURRENCY" default:"0" help:"password hashes (argon2id, 19 MiB each) at once; 0: the CPU count"`
	UploadMaxConcurrent int           `env:"SHIPFILE_UPLOAD_MAX_CONCURRENT" default:"32" help:"uploads in flight on this gateway (more: 503)"`
	UploadPerClient     int           `env:"SHIPFILE_UPLOAD_MAX_PER_CLIENT" default:"4" help:"uploads in flight per token, link, browser session and user (more: 429)"`
	UploadMaxOpen       int           `env:"SHIPFILE_UPLOAD_MAX_OPEN" default:"20" help:"unfinished tus uploads per token, link or browser user (more: 429; 0: no limit)"`
	UploadMinRate       int64         `env:"SHIPFILE_UPLOAD_MIN_RATE" default:"32768" help:"bytes a second an upload body must bring over every rate window, else it is cut off (0: no minimum)"`
	UploadRateWindow    time.Duration `env:"SHIPFILE_UPLOAD_RATE_WINDOW" default:"30s" help:"window over which SHIPFILE_UPLOAD_MIN_RATE is counted"`
	HTTPIdleTimeout     time.Duration `env:"SHIPFILE_HTTP_IDLE_TIMEOUT" default:"60s" help:"an idle keep-alive connection is closed after this"`
	HTTPBodyTimeout     time.Duration `env:"SHIPFILE_HTTP_BODY_TIMEOUT" default:"30s" help:"longest a request body other than an upload's (JSON, forms) may take to arrive, else 408 (0: no limit)"`
	LinkRate            int           `env:"SHIPFILE_LINK_RATE" default:"20" help:"requests a second per client IP to link routes (/p/..., /api/v1/links/...), across instances (0 disables)"`
	LinkBurst           int           `env:"SHIPFILE_LINK_BURST" default:"40" help:"burst of requests per client IP to link routes"`
	LoginRate           float64       `env:"SHIPFILE_LOGIN_RATE" default:"1" help:"sign-ins (POST /login) a second per client IP (an IPv6 client by its /64), across instances; 0.2: one every 5 s (0 disables)"`
	LoginBurst          int           `env:"SHIPFILE_LOGIN_BURST" default:"10" help:"burst of sign-ins per client IP"`
}

// WebConfig is the web UI's share of the gateway configuration.
type WebConfig struct {
	SessionLifetime time.Duration `env:"SHIPFILE_SESSION_LIFETIME" default:"168h" help:"longest a web UI sign-in lasts, however active"`
	SessionIdle     time.Duration `env:"SHIPFILE_SESSION_IDLE_TIMEOUT" default:"12h" help:"a web UI sign-in unused for this long ends"`
	CookieSecure    string        `env:"SHIPFILE_COOKIE_SECURE" default:"auto" help:"Secure cookies: auto (when SHIPFILE_PUBLIC_URL is https), true or false"`
	LoginFailures   int           `env:"SHIPFILE_LOGIN_MAX_FAILURES" default:"5" help:"failed sign-ins per e-mail or IP address before a lockout"`
	LoginLockout    time.Duration `env:"SHIPFILE_LOGIN_LOCKOUT" default:"15m" help:"window of counted failed sign-ins, and how long a lockout lasts"`
}

// SecureCookies resolves SHIPFILE_COOKIE_SECURE.
func (c WebConfig) SecureCookies(publicURL string) (bool, error) {
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

// Validate checks what the parser cannot.
func (c *Config) Validate() error {
	errs := []error{c.NATS.Validate()}
	if _, err := app.ParseScanMode(c.Scan.Mode, c.Scan.ClamdAddr); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Web.SecureCookies(c.PublicURL); err != nil {
		errs = append(errs, err)
	}
	if c.UploadPartSize < 5<<20 {
		errs = append(errs, errors.New("SHIPFILE_UPLOAD_PART_SIZE must be at least 5 MiB"))
	}
	if c.Web.SessionLifetime <= 0 || c.Web.SessionIdle <= 0 || c.Web.LoginFailures < 1 || c.Web.LoginLockout <= 0 {
		errs = append(errs, errors.New("SHIPFILE_SESSION_LIFETIME, SHIPFILE_SESSION_IDLE_TIMEOUT, SHIPFILE_LOGIN_MAX_FAILURES and SHIPFILE_LOGIN_LOCKOUT must be positive"))
	}
	if c.Edge.UploadRateWindow <= 0 || c.Edge.HTTPIdleTimeout <= 0 || c.Edge.UploadMinRate < 0 || c.Edge.LinkRate < 0 {
		errs = append(errs, errors.New("SHIPFILE_UPLOAD_RATE_WINDOW and SHIPFILE_HTTP_IDLE_TIMEOUT must be positive, SHIPFILE_UPLOAD_MIN_RATE and SHIPFILE_LINK_RATE not negative"))
	}
	if c.Edge.LoginRate < 0 || c.Edge.HTTPBodyTimeout < 0 {
		errs = append(errs, errors.New("SHIPFILE_LOGIN_RATE and SHIPFILE_HTTP_BODY_TIMEOUT must not be negative"))
	}
	if c.OIDC.Issuer != "" && c.OIDC.ClientID == "" {
		errs = append(errs, errors.New("SHIPFILE_OIDC_CLIENT_ID is required with SHIPFILE_OIDC_ISSUER"))
	}
	if c.OIDC.Issuer != "" && c.OIDC.Recheck <= 0 {
		errs = append(errs, errors.New("SHIPFILE_OIDC_RECHECK must be positive"))
	}
	switch strings.ToLower(strings.TrimSpace(c.OIDC.PasswordLogin)) {
	case "", "true", "false":
	default:
		errs = append(errs, errors.New("SHIPFILE_PASSWORD_LOGIN must be true or false"))
	}
	if c.OIDC.Issuer == "" && c.OIDC.PasswordLoginOff() {
		errs = append(errs, errors.New("SHIPFILE_PASSWORD_LOGIN=false needs SHIPFILE_OIDC_ISSUER: nobody could sign in to the web UI"))
	}
	if c.ResumeWindow <= 0 || c.UploadLease <= 0 || c.UploadSweep <= 0 || c.UploadLockWait <= 0 {
		errs = append(errs, errors.New("SHIPFILE_UPLOAD_RESUME_WINDOW, SHIPFILE_UPLOAD_LOCK_LEASE, SHIPFILE_UPLOAD_LOCK_WAIT and SHIPFILE_UPLOAD_SWEEP_INTERVAL must be positive"))
	}
	if c.Edge.UploadMaxOpen < 0 {
		errs = append(errs, errors.New("SHIPFILE_UPLOAD_MAX_OPEN must not be negative"))
	}
	return errors.Join(errs...)
}

// API is the REST API's share of the configuration.
func (c *Config) API() httpapi.Config {
	secure, _ := c.Web.SecureCookies(c.PublicURL) // Validate reports a bad value
	return httpapi.Config{
		SecureCookies:  secure,
		MaxJSONBytes:   c.MaxJSONBytes,
		MaxFileSize:    c.MaxFileSize,
		RatePerSecond:  float64(c.RateLimit),
		RateBurst:      c.RateBurst,
		TrustedProxies: splitList(c.TrustedProxies),
		Uploads: httpapi.UploadLimits{
			MaxConcurrent: c.Edge.UploadMaxConcurrent, PerClient: c.Edge.UploadPerClient,
			MinRate: c.Edge.UploadMinRate, RateWindow: c.Edge.UploadRateWindow,
		},
		// JSON and form bodies: the uploads' minimum rate, and a time limit.
		Bodies: httpapi.BodyLimits{
			MinRate: c.Edge.UploadMinRate, RateWindow: c.Edge.UploadRateWindow, Timeout: c.Edge.HTTPBodyTimeout,
		},
	}
}

// Deps are what New connects the graph to, and what tests adjust.
type Deps struct {
	Pool    *pgxpool.Pool
	Objects *storage.Store
	// JS is where the outbox relay publishes; nil: no relay (OutboxWake, if set, is
	// what the store calls after committing outbox rows).
	JS         jetstream.JetStream
	OutboxWake func()
	// Registry receives the metrics; nil: a new registry (Service.Registry).
	Registry *prometheus.Registry
	Log      *slog.Logger
	// Secrets opens the webhook secrets; nil: cfg.Secrets' keyring.
	Secrets *secretbox.Keyring
	// Hasher hashes every password; nil: one of cfg.Edge.HashConcurrency.
	Hasher *app.Hasher
	// LinkRate overrides cfg.Edge.LinkRate (requests a second per client IP) when
	// positive (tests: fractions).
	LinkRate float64
	// API replaces the REST API's configuration derived from cfg (tests).
	API *httpapi.Config
}

// Service is the gateway's graph.
type Service struct {
	// Handler serves the REST API, the web UI, the docs and the link routes.
	Handler    *gin.Engine
	Registry   *prometheus.Registry
	DB         *store.Postgres
	Identity   *identity.Identity
	TokenCache *identity.TokenCache
	Packages   *packages.Packages
	Links      *links.Links
	Resumable  *transfers.Resumable
	Policies   *policies.Policies
	Webhooks   *webhookadmin.Service
	// Audit verifies and exports the audit chain; Holds places legal holds (and, on a
	// bucket made with object lock, S3's legal hold on their objects).
	Audit   *audit.Chain
	Holds   *audit.Holds
	Reports *audit.Reports
	// Sessions signs browsers in; Start runs its sweeper.
	Sessions *identity.Sessions
	// Recheck checks sessions begun through the OpenID provider again; nil without a
	// provider. Start runs it.
	Recheck *identity.OIDCRecheck
	// Relay publishes the outbox; nil without Deps.JS.
	Relay *outbox.Relay
	// Previews makes the image previews; Start runs its consumer of
	// package.file_uploaded when there is a Deps.JS.
	Previews        *previews.Maker
	previewConsumer *previewconsumer.Consumer

	cfg         Config
	log         *slog.Logger
	secrets     *secretbox.Keyring
	tokenUsage  *identity.TokenUsage
	identityDB  *identitydb.Store
	webhookDB   *webhookadmindb.Store
	transfersDB *transfersdb.Store
}

// New builds the gateway's graph from cfg on deps. It starts nothing: Start does.
func New(_ context.Context, cfg Config, deps Deps) (*Service, error) {
	log := pkgservice.LoggerOr(deps.Log)
	secrets := deps.Secrets
	if secrets == nil {
		var err error
		if secrets, err = cfg.Secrets.Keyring(); err != nil {
			return nil, err
		}
	}
	secure, err := cfg.Web.SecureCookies(cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	reg := pkgservice.RegistryOr(deps.Registry)
	s := &Service{Registry: reg, cfg: cfg, log: log, secrets: secrets}
	// Mail jobs carry magic links: the stores seal them under SHIPFILE_SECRET_KEY
	// before they are written to the outbox, and the relay opens them as it publishes,
	// so that no raw link is ever readable in the database (docs/API.md, "Hostile clients").
	sqlOpts := []sqldb.Option{sqldb.WithSealer(sealPayload(secrets))}
	switch {
	case deps.JS != nil:
		// The relay publishes committed outbox rows; the stores wake it after each
		// commit that wrote some.
		s.Relay = outbox.NewRelay(deps.Pool, deps.JS, outbox.Options{Log: log, Registerer: reg, Open: openPayload(secrets)})
		sqlOpts = append(sqlOpts, sqldb.WithOutboxWake(s.Relay.Wake))
	case deps.OutboxWake != nil:
		sqlOpts = append(sqlOpts, sqldb.WithOutboxWake(deps.OutboxWake))
	}
	// Every store writes its changes' effects through sql (one relay to wake, one key).
	sql := sqldb.NewDB(deps.Pool, sqlOpts...)
	db := store.NewPostgres(deps.Pool, store.WithDB(sql), store.WithRegisterer(reg))
	s.DB = db
	s.identityDB = identitydb.NewStore(sql)
	// Every password of this gateway (sign-in, setup, users, link passwords) is hashed
	// through one Hasher: at most SHIPFILE_HASH_CONCURRENCY argon2id at once.
	hasher := deps.Hasher
	if hasher == nil {
		hasher = app.NewHasher(cfg.Edge.HashConcurrency, app.DefaultHashWait)
	}
	// Token look-ups are cached while the change feed (LISTEN on the triggers'
	// channel) is current; last_used_at is written in batches.
	s.TokenCache = identity.NewTokenCache(identity.DefaultTokenCacheTTL, identity.DefaultTokenFeedWindow)
	s.tokenUsage = identity.NewTokenUsage(s.identityDB, identity.DefaultTokenUsageInterval)
	s.Policies = policies.New(policiesdb.NewStore(sql), policies.WithStorageCap(cfg.StorageCap), policies.WithNotifier(policies.OutboxNotifier{W: db}))
	s.Identity = identity.NewIdentity(s.identityDB, identity.WithTokenCache(s.TokenCache), identity.WithTokenUsage(s.tokenUsage), identity.WithHasher(hasher),
		identity.WithLogger(log), identity.WithGroupSync(s.Policies))
	linkRate := float64(cfg.Edge.LinkRate)
	if deps.LinkRate > 0 {
		linkRate = deps.LinkRate
	}
	linksDB := linksdb.NewStore(sql)
	rate := links.NewLinkRate(linksDB, linkRate, cfg.Edge.LinkBurst)
	objectStore := store.NewObjects(deps.Objects, uint64(cfg.UploadPartSize))
	auditDB := auditdb.NewStore(sql)
	s.Audit = audit.NewChain(auditDB)
	var locker audit.ObjectLocker
	if deps.Objects.ObjectLock {
		locker = objectStore
	}
	s.Holds = audit.NewHolds(auditDB, locker, log)
	s.Reports = audit.NewReports(auditDB)
	pkgOpts := []packages.Option{packages.WithPolicies(s.Policies, cfg.UploadPartSize)}
	if deps.Objects.ObjectLock {
		pkgOpts = append(pkgOpts, packages.WithObjectLock(objectStore))
	}
	s.Packages = packages.NewPackages(db, objectStore, app.Limits{MaxFileSize: cfg.MaxFileSize, MaxFiles: cfg.MaxFiles}, cfg.PublicURL, pkgOpts...)
	s.Packages.UseHasher(hasher)
	scanMode, err := app.ParseScanMode(cfg.Scan.Mode, cfg.Scan.ClamdAddr)
	if err != nil {
		return nil, err
	}
	s.Packages.UseScanMode(scanMode)
	s.Links = links.New(s.Packages, linksDB, db)
	s.Previews = previews.New(previewsdb.NewStore(sql), objectStore, previews.Options{Scan: scanMode, Log: log, Locker: locker})
	if deps.JS != nil {
		previewMetrics, err := consumer.NewMetrics(reg)
		if err != nil {
			return nil, err
		}
		s.previewConsumer = previewconsumer.New(deps.JS, s.Previews, previewconsumer.Options{Log: log, Metrics: previewMetrics})
	}
	s.transfersDB = transfersdb.NewStore(sql, db)
	s.Resumable = transfers.NewResumable(s.Packages, s.Links, s.transfersDB, objectStore, transfers.TusConfig{
		ResumeWindow: cfg.ResumeWindow, Lease: cfg.UploadLease, LockWait: cfg.UploadLockWait, MaxOpen: cfg.Edge.UploadMaxOpen,
		Quotas: s.Policies,
	}, log)
	s.webhookDB = webhookadmindb.NewStore(sql)
	s.Webhooks = webhookadmin.New(s.webhookDB, secrets, cfg.WebhookPrivate)
	s.Sessions = identity.NewSessions(s.identityDB, s.Identity, identity.SessionConfig{
		Lifetime: cfg.Web.SessionLifetime, IdleTimeout: cfg.Web.SessionIdle,
		MaxFailures: cfg.Web.LoginFailures, Lockout: cfg.Web.LoginLockout,
	}, identity.WithOIDCRecheck(secrets, cfg.OIDC.Recheck))
	ui, err := web.New(web.Deps{
		Log: log, Identity: s.Identity, Sessions: s.Sessions, Packages: s.Packages, Links: s.Links, Webhooks: s.Webhooks, Policies: s.Policies, Reports: s.Reports, LinkRate: rate, OIDCStore: s.identityDB,
		LoginRate: links.NewLoginRate(linksDB, cfg.Edge.LoginRate, cfg.Edge.LoginBurst),
		Config: web.Config{SecureCookies: secure, SessionLifetime: cfg.Web.SessionLifetime, MaxFileSize: cfg.MaxFileSize,
			NoPasswordLogin: cfg.OIDC.PasswordLoginOff(), OIDC: cfg.OIDC.Web(cfg.PublicURL)},
	})
	if err != nil {
		return nil, fmt.Errorf("web UI: %w", err)
	}
	if refresher := ui.OIDCRefresher(); refresher != nil {
		s.Recheck = identity.NewOIDCRecheck(s.identityDB, s.identityDB, s.Identity, refresher, secrets, cfg.OIDC.Web(cfg.PublicURL).Policy, cfg.OIDC.Recheck, log)
	}
	api := cfg.API()
	if deps.API != nil {
		api = *deps.API
	}
	router, err := httpapi.New(httpapi.Deps{
		Log:       log,
		Identity:  s.Identity,
		Packages:  s.Packages,
		Links:     s.Links,
		Webhooks:  s.Webhooks,
		Policies:  s.Policies,
		Audit:     s.Audit,
		Holds:     s.Holds,
		Reports:   s.Reports,
		Resumable: s.Resumable,
		Registry:  reg,
		Pages:     ui,
		LinkRate:  rate,
		Config:    api,
	})
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	s.Handler = router
	return s, nil
}

// ResealSecrets seals the webhook secrets stored in clear or under
// SHIPFILE_SECRET_KEY_PREVIOUS under SHIPFILE_SECRET_KEY.
func (s *Service) ResealSecrets(ctx context.Context) error {
	rep, err := s.webhookDB.ResealWebhookSecrets(ctx, s.secrets)
	if err != nil {
		return err
	}
	// The key id names the key (docs/OPERATIONS.md, rotation) and reveals nothing of it.
	s.log.Info("webhook secrets sealed under SHIPFILE_SECRET_KEY", "key_id", s.secrets.CurrentID(), "resealed", rep.Resealed)
	if len(rep.Unknown) > 0 {
		s.log.Error("webhook secrets sealed under a key that is neither SHIPFILE_SECRET_KEY nor SHIPFILE_SECRET_KEY_PREVIOUS: "+
			"their deliveries fail until that key is set as SHIPFILE_SECRET_KEY_PREVIOUS (or the secrets are rotated)",
			"subscriptions", rep.Unknown)
	}
	return nil
}

// Start runs the background work beside the HTTP servers: the auth change feed, the
// sweeper of sessions and sign-in counts, the listener of asks to let go of tus uploads,
// the tokens' last_used_at writer, the tus sweeper (when cfg.UploadSweep is positive), the
// preview consumer and the outbox relay (when there is a bus). The returned stop ends them,
// then the runners of the package creations' group commits (store.Postgres.Close), and the
// usage writer and the relay last (after the HTTP server drained, so the last requests'
// writes and events go out too; rows the relay leaves are published by another instance
// or at the next start). The feed and the sweeper also end with ctx.
func (s *Service) Start(ctx context.Context) (stop func()) {
	var bg, tail sync.WaitGroup
	bgCtx, stopBG := context.WithCancel(ctx)
	tailCtx, stopTail := context.WithCancel(context.WithoutCancel(ctx))
	bg.Go(func() { s.identityDB.FollowAuthChanges(bgCtx, s.TokenCache, s.log) })
	bg.Go(func() { s.transfersDB.FollowUploadReleases(bgCtx, s.Resumable.AskRelease, s.log) })
	if s.cfg.UploadSweep > 0 {
		bg.Go(func() { s.Resumable.RunSweeper(bgCtx, s.cfg.UploadSweep) })
		bg.Go(func() {
			s.Policies.RunSweeper(bgCtx, s.cfg.UploadSweep, func(err error) { s.log.Warn("sweep lapsed quota holds", "err", err) })
		})
	}
	if s.Recheck != nil {
		bg.Go(func() { s.Recheck.Run(bgCtx) })
	}
	if s.previewConsumer != nil {
		bg.Go(func() {
			if err := s.previewConsumer.Run(bgCtx); err != nil {
				s.log.Error("preview consumer", "err", err)
			}
		})
	}
	// Ended sessions and sign-in counts of the past go whether or not anyone signs in.
	bg.Go(func() {
		s.Sessions.RunSweeper(bgCtx, identity.DefaultSweepEvery, func(err error) { s.log.Warn("sweep sessions and sign-in counts", "err", err) })
	})
	tail.Go(func() {
		s.tokenUsage.Run(tailCtx, func(err error) { s.log.Warn("write tokens' last_used_at", "err", err) })
	})
	if s.Relay != nil {
		tail.Go(func() {
			if err := s.Relay.Run(tailCtx); err != nil && !errors.Is(err, context.Canceled) {
				s.log.Error("outbox relay", "err", err)
			}
		})
	}
	return func() {
		stopBG()
		bg.Wait()
		s.DB.Close()
		stopTail()
		tail.Wait()
	}
}

// sealPayload seals an outbox payload under the ring's current key.
func sealPayload(ring *secretbox.Keyring) func([]byte) ([]byte, error) {
	return func(p []byte) ([]byte, error) {
		sealed, err := ring.Seal(string(p))
		return []byte(sealed), err
	}
}

// openPayload opens what sealPayload sealed; a payload that is not sealed (a mail job
// written before payloads were sealed) is published as it is.
func openPayload(ring *secretbox.Keyring) func([]byte) ([]byte, error) {
	return func(p []byte) ([]byte, error) {
		if !secretbox.IsSealed(string(p)) {
			return p, nil
		}
		opened, err := ring.Open(string(p))
		return []byte(opened), err
	}
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
