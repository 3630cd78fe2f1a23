package web

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
)

// setupForm shows the first-admin form while no user exists, and 404 afterwards.
func (w *Web) setupForm(c *gin.Context) {
	setup, err := w.identity.NeedsSetup(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	if !setup {
		_ = c.Error(app.NotFound("page"))
		return
	}
	w.render(c, http.StatusOK, "setup", view{Title: "Set up shipfile"})
}

func (w *Web) setupSubmit(c *gin.Context) {
	in := app.NewUser{Email: c.PostForm("email"), Name: c.PostForm("name"), Password: c.PostForm("password")}
	v := view{Title: "Set up shipfile", Form: map[string]string{"email": in.Email, "name": in.Name}}
	if in.Password != c.PostForm("password_again") {
		v.Errors = map[string]string{"password_again": "The two passwords differ."}
		w.render(c, http.StatusUnprocessableEntity, "setup", v)
		return
	}
	_, err := w.identity.SetupFirstAdmin(c.Request.Context(), in)
	if fe, msg, ok := formErrors(err, "email", "name", "password"); ok {
		v.Errors, v.Error = fe, msg
		w.render(c, http.StatusUnprocessableEntity, "setup", v)
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/login?msg=admin-created")
}

func (w *Web) loginForm(c *gin.Context) {
	if _, ok := currentUser(c); ok {
		c.Redirect(http.StatusSeeOther, localPath(c.Query("next")))
		return
	}
	setup, err := w.identity.NeedsSetup(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	if setup && w.oidc == nil { // with a provider, the first admin may come through it
		c.Redirect(http.StatusSeeOther, "/setup")
		return
	}
	w.render(c, http.StatusOK, "login", view{Title: "Sign in", Form: map[string]string{"next": localPath(c.Query("next"))}})
}

func (w *Web) loginSubmit(c *gin.Context) {
	email, password := c.PostForm("email"), c.PostForm("password")
	v := view{Title: "Sign in", Form: map[string]string{"email": email, "next": localPath(c.PostForm("next"))}}
	if email == "" || password == "" {
		v.Errors = map[string]string{}
		if email == "" {
			v.Errors["email"] = "Enter your e-mail address."
		}
		if password == "" {
			v.Errors["password"] = "Enter your password."
		}
		w.render(c, http.StatusUnprocessableEntity, "login", v)
		return
	}
	_, raw, err := w.sessions.Login(c.Request.Context(), email, password, client(c))
	var throttled *identity.ThrottledError
	switch {
	case errors.As(err, &throttled):
		wait := time.Until(throttled.Until)
		c.Header("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		v.Error = "Too many failed sign-ins. Try again in " + plural(int(math.Ceil(wait.Minutes())), "minute") + "."
		w.render(c, http.StatusTooManyRequests, "login", v)
		return
	case errors.Is(err, identity.ErrBadCredentials):
		v.Error = "Wrong e-mail address or password."
		w.render(c, http.StatusUnauthorized, "login", v)
		return
	case err != nil:
		_ = c.Error(err)
		return
	}
	w.setCookie(c, w.cookies.session, raw, int(w.cfg.SessionLifetime.Seconds()))
	c.Redirect(http.StatusSeeOther, v.Form["next"])
}

// loginRateGuard takes one request from the client IP's sign-in rate
// (SHIPFILE_LOGIN_RATE, an IPv6 client by its /64, counted across gateway instances)
// before a sign-in does anything else: 429 with Retry-After over the rate.
func (w *Web) loginRateGuard(c *gin.Context) {
	if err := w.loginRate.Take(c.Request.Context(), c.ClientIP()); err != nil {
		_ = c.Error(err)
		c.Abort()
		return
	}
	c.Next()
}

func (w *Web) logout(c *gin.Context) {
	if raw, ok := c.Get(ctxSession); ok {
		u, _ := currentUser(c)
		if err := w.sessions.Logout(c.Request.Context(), raw.(string), identity.UserActor(u, client(c))); err != nil {
			_ = c.Error(err)
			return
		}
	}
	w.setCookie(c, w.cookies.session, "", -1)
	if target := w.oidcSignOutURL(c); target != "" {
		c.Redirect(http.StatusSeeOther, target) // the provider's session ends too
		return
	}
	c.Redirect(http.StatusSeeOther, "/login?msg=signed-out")
}
