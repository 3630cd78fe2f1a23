// Package httpapi is the gateway's HTTP transport: the REST API under /api/v1, the docs,
// the operational endpoints and the web pages, on gin.
package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	api "github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
	"github.com/shipfile/shipfile/services/gateway/internal/app/policies"
	"github.com/shipfile/shipfile/services/gateway/internal/app/transfers"
	"github.com/shipfile/shipfile/services/gateway/internal/app/webhookadmin"
	"github.com/shipfile/shipfile/services/gateway/internal/docs"
)

// Config is the transport's share of the gateway configuration.
type Config struct {
	MaxJSONBytes  int64
	MaxFileSize   int64
	RatePerSecond float64
	RateBurst     int
	// TrustedProxies are the CIDRs of proxies whose X-Forwarded-For names the
	// client; without any, the client is the socket peer.
	TrustedProxies []string
	// Uploads bound the upload routes.
	Uploads UploadLimits
	// SecureCookies marks every cookie the API sets Secure (SHIPFILE_COOKIE_SECURE).
	SecureCookies bool
	// Bodies bound how the body of every route but the uploads may arrive (its
	// MaxBytes is MaxJSONBytes when zero).
	Bodies BodyLimits
}

// Deps is what the router serves.
type Deps struct {
	Log      *slog.Logger
	Identity *identity.Identity
	Packages *packages.Packages
	// Links serves the recipient's side: what a magic link opens.
	Links    *links.Links
	Webhooks *webhookadmin.Service
	// Policies serves groups, the default policy and usage.
	Policies *policies.Policies
	// Audit verifies and exports the audit chain; Holds places legal holds.
	Audit   *audit.Chain
	Holds   *audit.Holds
	Reports *audit.Reports
	// Resumable serves tus uploads.
	Resumable *transfers.Resumable
	Registry  *prometheus.Registry
	// LinkRate limits the link routes per client IP (nil: no limit).
	LinkRate *links.LinkRate
	Config   Config
	// Pages is the web UI (package web); nil serves the API alone.
	Pages Pages
}

// Pages is the web UI, served beside the API under the same origin.
type Pages interface {
	// Mount adds the UI's routes (everything outside /api/v1).
	Mount(r *gin.Engine)
	// SessionUser authenticates an API request that carries no bearer token by the
	// UI's session cookie: ok is false without a session; an unsafe method without
	// the session's CSRF token in X-CSRF-Token is an error.
	SessionUser(c *gin.Context) (u app.User, ok bool, err error)
	// ErrorPage writes an HTML error page in the language of the request's pages.
	ErrorPage(c *gin.Context, status int, detail string)
}

type handlers struct {
	log         *slog.Logger
	identity    *identity.Identity
	packages    *packages.Packages
	links       *links.Links
	webhooks    *webhookadmin.Service
	policies    *policies.Policies
	audit       *audit.Chain
	holds       *audit.Holds
	reports     *audit.Reports
	resumable   *transfers.Resumable
	maxJSON     int64
	maxFileSize int64
	spec        *docs.Spec
	// secureCookies marks the cookies the API sets Secure.
	secureCookies bool
}

// New builds the gin engine with every route.
func New(d Deps) (*gin.Engine, error) {
	spec, err := docs.LoadSpec()
	if err != nil {
		return nil, err
	}
	h := &handlers{
		log: d.Log, identity: d.Identity, packages: d.Packages, links: d.Links, webhooks: d.Webhooks, policies: d.Policies, resumable: d.Resumable,
		audit: d.Audit, holds: d.Holds, reports: d.Reports,
		maxJSON: d.Config.MaxJSONBytes, maxFileSize: d.Config.MaxFileSize, spec: spec,
		secureCookies: d.Config.SecureCookies,
	}

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.ContextWithFallback = true
	if err := r.SetTrustedProxies(d.Config.TrustedProxies); err != nil {
		return nil, err
	}
	bodies := d.Config.Bodies
	if bodies.MaxBytes == 0 {
		bodies.MaxBytes = d.Config.MaxJSONBytes
	}
	r.Use(traced())
	r.Use(observe(d.Log, d.Registry), securityHeaders, errorMiddleware(d.Log, d.Pages), recovery(d.Log, d.Pages), bodyGuard(bodies))
	r.NoRoute(notFound)
	r.NoMethod(methodNotAllowed)

	// /readyz and /metrics are served on the ops address only (SHIPFILE_OPS_ADDR, by
	// the gateway's main with ops.Handler), never here on the public address.
	r.GET("/healthz", gin.WrapF(ops.Healthz))
	r.StaticFS(docs.AssetsPath, docs.Assets())
	if d.Pages != nil {
		d.Pages.Mount(r)
	}

	v1 := r.Group("/api/v1")
	v1.GET("/health", h.health)
	v1.GET("/openapi.json", h.openAPI)
	v1.GET("/docs", h.swaggerUI)
	v1.GET("/redoc", h.redoc)

	// The recipient's side: the magic link is the only credential. Each route is
	// rate-limited per client IP and answers 410 for a dead link before anything else.
	uploads := uploadGuard(d.Config.Uploads, d.Registry)
	links := v1.Group("/links/:token", linkGuard(d.Links, d.LinkRate))
	links.GET("", h.viewLink)
	links.GET("/files/:file_id", h.downloadViaLink)
	links.HEAD("/files/:file_id", h.downloadViaLink)
	links.GET("/files/:file_id/preview", h.previewViaLink)
	links.GET("/archive", h.archiveViaLink)
	links.GET("/manifest", h.linkManifest)
	links.POST("/files", uploads, h.uploadViaLink)
	links.POST("/unlock", h.unlockLink)

	// Resumable uploads (tus): Tus-Resumable on every answer; on the recipient's side the
	// link's rate and dead-link check come first, as on every link route; PATCH (and a
	// creation with a body) go through the same upload limits as the multipart uploads.
	lim := newLimiter(d.Config.RatePerSecond, d.Config.RateBurst)
	tusLinks := v1.Group("/links/:token", tusResumable, linkGuard(d.Links, d.LinkRate), tusRequireVersion)
	tusLinks.OPTIONS("/uploads", h.tusOptions)
	tusLinks.OPTIONS("/uploads/:upload_id", h.tusOptions)
	h.mountTus(tusLinks, "/uploads", linkTarget, uploads)
	tusOwner := v1.Group("/packages/:id", tusResumable, tusRequireVersion)
	tusOwner.OPTIONS("/uploads", h.tusOptions)
	tusOwner.OPTIONS("/uploads/:upload_id", h.tusOptions)
	h.mountTus(tusOwner.Group("", authenticate(d.Identity, d.Pages), rateLimit(lim)), "/uploads", ownerTarget, uploads)

	authed := v1.Group("", authenticate(d.Identity, d.Pages), rateLimit(lim))
	authed.GET("/me", h.me)
	authed.PATCH("/me", h.patchMe)
	authed.GET("/me/tokens", h.listTokens)
	authed.POST("/me/tokens", h.createToken)
	authed.DELETE("/me/tokens/:id", h.deleteToken)
	authed.GET("/me/key", h.getKey)
	authed.PUT("/me/key", h.putKey)
	authed.GET("/me/usage", h.myUsage)

	authed.GET("/packages", h.listPackages)
	authed.POST("/packages", h.createPackage)
	authed.GET("/packages/:id", h.getPackage)
	authed.PATCH("/packages/:id", h.updatePackage)
	authed.DELETE("/packages/:id", h.deletePackage)
	authed.POST("/packages/:id/files", uploads, h.uploadFile)
	authed.GET("/packages/:id/files/:file_id/content", h.downloadFile)
	authed.GET("/packages/:id/files/:file_id/preview", h.previewFile)
	authed.DELETE("/packages/:id/files/:file_id", h.removeFile)
	authed.POST("/packages/:id/files/:file_id/release", h.releaseFile)
	authed.GET("/packages/:id/manifest", h.getManifest)
	authed.PUT("/packages/:id/manifest", h.putManifest)
	authed.POST("/packages/:id/finalize", h.finalizePackage)
	authed.POST("/packages/:id/revoke", h.revokePackage)
	authed.POST("/packages/:id/recipients", h.addRecipient)
	authed.POST("/packages/:id/recipients/:recipient_id/revoke", h.revokeRecipient)

	admin := authed.Group("/admin", requireAdmin)
	admin.GET("/audit", h.listAudit)
	admin.GET("/audit/export", h.exportAudit)
	admin.GET("/holds", h.listHolds)
	admin.POST("/holds", h.createHold)
	admin.POST("/holds/:id/release", h.releaseHold)
	admin.GET("/reports/activity", h.activityReport)
	admin.GET("/users", h.listUsers)
	admin.POST("/users", h.createUser)
	admin.PATCH("/users/:id", h.updateUser)
	admin.GET("/groups", h.listGroups)
	admin.POST("/groups", h.createGroup)
	admin.GET("/groups/:id", h.getGroup)
	admin.PATCH("/groups/:id", h.updateGroup)
	admin.DELETE("/groups/:id", h.deleteGroup)
	admin.PUT("/groups/:id/members/:user_id", h.putGroupMember)
	admin.DELETE("/groups/:id/members/:user_id", h.deleteGroupMember)
	admin.GET("/policies/default", h.getDefaultPolicy)
	admin.PUT("/policies/default", h.putDefaultPolicy)
	admin.GET("/usage", h.listUsage)
	admin.GET("/webhooks", h.listWebhooks)
	admin.POST("/webhooks", h.createWebhook)
	admin.GET("/webhooks/:id", h.getWebhook)
	admin.PATCH("/webhooks/:id", h.updateWebhook)
	admin.DELETE("/webhooks/:id", h.deleteWebhook)
	admin.POST("/webhooks/:id/test", h.testWebhook)
	admin.POST("/webhooks/:id/rotate-secret", h.rotateWebhookSecret)
	admin.GET("/webhooks/:id/deliveries", h.listWebhookDeliveries)
	admin.POST("/webhooks/:id/deliveries/:delivery_id/redeliver", h.redeliverWebhook)
	return r, nil
}

func (h *handlers) health(c *gin.Context) {
	c.JSON(http.StatusOK, api.Health{Status: "ok"})
}

func (h *handlers) openAPI(c *gin.Context) {
	c.Data(http.StatusOK, "application/json", h.spec.JSON)
}

func (h *handlers) swaggerUI(c *gin.Context) {
	if err := docs.Page(c.Writer, "swagger", "/api/v1/openapi.json"); err != nil {
		_ = c.Error(err)
	}
}

func (h *handlers) redoc(c *gin.Context) {
	if err := docs.Page(c.Writer, "redoc", "/api/v1/openapi.json"); err != nil {
		_ = c.Error(err)
	}
}

// observe logs each request and records its metrics. It logs the route template, never
// the raw path or query, which may carry a magic-link token.
func observe(log *slog.Logger, reg *prometheus.Registry) gin.HandlerFunc {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shipfile_http_requests_total",
		Help: "HTTP requests answered by the gateway, by route and status.",
	}, []string{"method", "route", "status"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "shipfile_http_request_duration_seconds",
		Help:    "Time to answer HTTP requests, by route.",
		Buckets: prometheus.DefBuckets,
	}, []string{"method", "route"})
	reg.MustRegister(requests, latency)
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		status := c.Writer.Status()
		elapsed := time.Since(start)
		requests.WithLabelValues(c.Request.Method, route, strconv.Itoa(status)).Inc()
		latency.WithLabelValues(c.Request.Method, route).Observe(elapsed.Seconds())
		log.LogAttrs(c.Request.Context(), slog.LevelInfo, "request",
			slog.String("method", c.Request.Method),
			slog.String("route", route),
			slog.Int("status", status),
			slog.Duration("duration", elapsed),
			slog.String("ip", c.ClientIP()),
		)
	}
}
