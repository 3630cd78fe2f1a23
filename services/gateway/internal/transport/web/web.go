// Package web is the gateway's web UI: server-rendered pages (html/template) for
// signing in, packages, API tokens and the admin's users, webhooks and audit log, and
// the recipient's page behind a magic link. One stylesheet and one small script are
// embedded and served from this origin, so the pages run under a Content-Security-
// Policy without inline scripts.
//
// Pages change things through HTML forms protected by a CSRF token bound to the
// session (before sign-in, to a random cookie). File uploads and owner downloads,
// which need progress or streaming, go to the REST API itself: the API accepts the
// session cookie when a request carries no bearer token, and then requires the same
// CSRF token in the X-CSRF-Token header on every unsafe method (see SessionUser).
package web

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
	"github.com/shipfile/shipfile/services/gateway/internal/app/policies"
	"github.com/shipfile/shipfile/services/gateway/internal/app/webhookadmin"
)

// Config is the web UI's share of the gateway configuration.
type Config struct {
	// SecureCookies marks cookies Secure and gives them the __Host- prefix; on when
	// the gateway is reached over HTTPS.
	SecureCookies bool
	// SessionLifetime is the Max-Age of the session cookie (the server ends
	// sessions on its own terms too).
	SessionLifetime time.Duration
	// MaxFileSize is shown beside the upload zones.
	MaxFileSize int64
	// NoPasswordLogin hides the password form and refuses POST /login
	// (SHIPFILE_PASSWORD_LOGIN=false).
	NoPasswordLogin bool
	// OIDC is the organization's OpenID provider; nil: no "Sign in with …".
	OIDC *OIDCConfig
}

// Deps is what the web UI works with.
type Deps struct {
	Log      *slog.Logger
	Identity *identity.Identity
	Sessions *identity.Sessions
	Packages *packages.Packages
	// Links serves the recipient's page and its unlock.
	Links    *links.Links
	Webhooks *webhookadmin.Service
	// Policies gives the usage bar, the forms' limits and the admin's policies page
	// (nil: no policies).
	Policies *policies.Policies
	// Reports gives the admins' activity report (nil: no report page).
	Reports *audit.Reports
	// LinkRate limits the recipient's page per client IP (nil: no limit).
	LinkRate *links.LinkRate
	// LoginRate limits sign-ins (POST /login) per client IP (nil: no limit).
	LoginRate *links.LinkRate
	// OIDCStore keeps sign-ins under way at the OpenID provider (with Config.OIDC).
	OIDCStore identity.OIDCStore
	Config    Config
}

// Web is the web UI. It implements httpapi.Pages.
type Web struct {
	log      *slog.Logger
	identity *identity.Identity
	sessions *identity.Sessions
	packages *packages.Packages
	links    *links.Links
	webhooks *webhookadmin.Service
	policies *policies.Policies
	reports  *audit.Reports
	linkRate *links.LinkRate
	// loginRate is the request rate of POST /login per client IP.
	loginRate *links.LinkRate
	cfg       Config
	pages     map[string]*pageTemplate
	cookies   cookieNames
	origin    *http.CrossOriginProtection
	// oidc is the relying party of Config.OIDC; nil without one.
	oidc      *oidcClient
	oidcStore identity.OIDCStore
}

// New parses the templates and returns the web UI.
func New(d Deps) (*Web, error) {
	pages, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	w := &Web{
		log: d.Log, identity: d.Identity, sessions: d.Sessions, packages: d.Packages, links: d.Links, webhooks: d.Webhooks, policies: d.Policies, reports: d.Reports, linkRate: d.LinkRate, loginRate: d.LoginRate,
		cfg: d.Config, pages: pages, cookies: newCookieNames(d.Config.SecureCookies),
		origin: http.NewCrossOriginProtection(),
	}
	if d.Config.OIDC != nil {
		if d.OIDCStore == nil {
			return nil, errors.New("web: OIDC needs an OIDCStore")
		}
		w.oidc, w.oidcStore = newOIDCClient(*d.Config.OIDC), d.OIDCStore
	}
	return w, nil
}

// maxFormBytes bounds the body of a form post (uploads go to the API instead).
const maxFormBytes = 64 << 10

// Mount adds the UI's routes to r.
func (w *Web) Mount(r *gin.Engine) {
	r.GET(staticPrefix+"/*file", w.static)
	r.HEAD(staticPrefix+"/*file", w.static)
	r.GET(swPath, w.serviceWorker)

	g := r.Group("", w.oidcFormAction, w.load)
	g.GET("/", w.requireUser, w.dashboard)
	g.GET("/setup", w.setupForm)
	g.POST("/setup", w.checkCSRF, w.setupSubmit)
	g.GET("/login", w.loginForm)
	g.POST("/login", w.passwordLogin, w.loginRateGuard, w.checkCSRF, w.loginSubmit)
	g.GET("/auth/oidc/login", w.oidcRate, w.oidcLogin)
	g.GET("/auth/oidc/callback", w.oidcRate, w.oidcCallback)
	g.POST("/logout", w.checkCSRF, w.logout)
	g.GET("/p/:token", w.linkRateGuard, w.recipient)
	g.POST("/p/:token", w.linkRateGuard, w.checkCSRF, w.unlock)

	u := g.Group("", w.requireUser)
	u.GET("/send", w.sendForm)
	u.POST("/send", w.checkCSRF, w.sendSubmit)
	u.GET("/request", w.requestForm)
	u.POST("/request", w.checkCSRF, w.requestSubmit)
	u.GET("/packages/:id", w.packagePage)
	u.POST("/packages/:id/finalize", w.checkCSRF, w.finalize)
	u.POST("/packages/:id/edit", w.checkCSRF, w.editPackage)
	u.GET("/packages/:id/revoke", w.confirmRevoke)
	u.POST("/packages/:id/revoke", w.checkCSRF, w.revoke)
	u.POST("/packages/:id/recipients", w.checkCSRF, w.addRecipient)
	u.POST("/packages/:id/recipients/:recipient_id/revoke", w.checkCSRF, w.revokeRecipient)
	u.GET("/packages/:id/delete", w.confirmDelete)
	u.POST("/packages/:id/delete", w.checkCSRF, w.deletePackage)
	u.POST("/packages/:id/files/:file_id/remove", w.checkCSRF, w.removeFile)
	u.POST("/packages/:id/files/:file_id/release", w.checkCSRF, w.releaseFile)
	u.GET("/account", w.account)
	u.POST("/account/tokens", w.checkCSRF, w.createToken)
	u.POST("/account/language", w.checkCSRF, w.setLanguage)
	u.POST("/account/tokens/:id/revoke", w.checkCSRF, w.revokeToken)
	u.POST("/account/sso/link", w.oidcRate, w.checkCSRF, w.linkSSO)
	u.POST("/account/sso/unlink", w.checkCSRF, w.unlinkSSO)

	a := u.Group("/admin", w.requireAdmin)
	a.GET("/users", w.users)
	a.POST("/users", w.checkCSRF, w.createUser)
	a.GET("/users/:id", w.editUser)
	a.POST("/users/:id", w.checkCSRF, w.saveUser)
	a.GET("/webhooks", w.webhookList)
	a.POST("/webhooks", w.checkCSRF, w.createWebhook)
	a.GET("/webhooks/:id", w.webhookPage)
	a.POST("/webhooks/:id", w.checkCSRF, w.saveWebhook)
	a.POST("/webhooks/:id/test", w.checkCSRF, w.testWebhook)
	a.POST("/webhooks/:id/rotate", w.checkCSRF, w.rotateWebhook)
	a.GET("/webhooks/:id/delete", w.confirmDeleteWebhook)
	a.POST("/webhooks/:id/delete", w.checkCSRF, w.deleteWebhook)
	a.POST("/webhooks/:id/deliveries/:delivery_id/redeliver", w.checkCSRF, w.redeliver)
	a.GET("/audit", w.audit)
	a.GET("/policies", w.policiesPage)
	a.GET("/reports/activity", w.activityPage)
}

func client(c *gin.Context) app.Client {
	grant, _ := c.Cookie(linkCookie)
	cl := app.NewClient(c.ClientIP(), c.Request.UserAgent())
	cl.Grant = grant
	return cl
}
