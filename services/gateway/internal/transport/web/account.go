package web

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
)

type accountData struct {
	Tokens   []app.Token
	NewToken *app.Token
	Raw      string // the new token's raw value, shown this once
	Today    string
	// SSO is the provider's name when there is one ("" otherwise): the account page
	// offers to link the user's identity there (SSOLinked false), or says it is
	// linked and, when the user has a password to sign in with, offers to unlink it.
	SSO       string
	SSOLinked bool
	CanUnlink bool
}

// account shows the user's account and API tokens.
func (w *Web) account(c *gin.Context) {
	w.showAccount(c, http.StatusOK, view{}, accountData{})
}

func (w *Web) showAccount(c *gin.Context, status int, v view, d accountData) {
	u, _ := currentUser(c)
	tokens, err := w.identity.ListTokens(c.Request.Context(), u.ID)
	if err != nil {
		_ = c.Error(err)
		return
	}
	d.Tokens = tokens
	d.Today = time.Now().UTC().Format("2006-01-02")
	if w.oidc != nil {
		d.SSO, d.SSOLinked, d.CanUnlink = w.oidc.cfg.Name, u.OIDCSubject != "", u.OIDCSubject != "" && u.PasswordHash != ""
	}
	v.Title, v.Section, v.D = "Account", "account", d
	w.render(c, status, "account", v)
}

// createToken mints an API token and shows its raw value this once. The expiry is a
// date: the token works through the end of that day (UTC).
func (w *Web) createToken(c *gin.Context) {
	u, _ := currentUser(c)
	name, expires := strings.TrimSpace(c.PostForm("name")), strings.TrimSpace(c.PostForm("expires_on"))
	v := view{Form: map[string]string{"name": name, "expires_on": expires}}
	var at *time.Time
	if expires != "" {
		day, err := time.Parse("2006-01-02", expires)
		if err != nil {
			v.Errors = map[string]string{"expires_on": "Must be a date such as 2027-01-31."}
			w.showAccount(c, http.StatusUnprocessableEntity, v, accountData{})
			return
		}
		end := day.Add(24 * time.Hour)
		at = &end
	}
	t, raw, err := w.identity.CreateToken(c.Request.Context(), u.ID, name, at, identity.UserActor(u, client(c)))
	if fe, msg, ok := formErrors(err, "name", "expires_at"); ok {
		if m, ok := fe["expires_at"]; ok {
			fe = map[string]string{"expires_on": m}
		}
		v.Errors, v.Error = fe, msg
		w.showAccount(c, http.StatusUnprocessableEntity, v, accountData{})
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	w.showAccount(c, http.StatusCreated, view{}, accountData{NewToken: &t, Raw: raw})
}

func (w *Web) revokeToken(c *gin.Context) {
	u, _ := currentUser(c)
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		_ = c.Error(app.NotFound("token"))
		return
	}
	if err := w.identity.RevokeToken(c.Request.Context(), u.ID, id, identity.UserActor(u, client(c))); err != nil {
		_ = c.Error(err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/account?msg=token-revoked")
}

// setLanguage stores the language the user chose for the pages and the e-mails
// about their packages and account ("": automatic), and sets this browser's
// switcher cookie to it (or forgets the cookie), so the next page is in it at once.
func (w *Web) setLanguage(c *gin.Context) {
	u, _ := currentUser(c)
	lang := strings.TrimSpace(c.PostForm("language"))
	if _, err := w.identity.SetLanguage(c.Request.Context(), u.ID, lang); err != nil {
		if fe, msg, ok := formErrors(err, "language"); ok {
			w.showAccount(c, http.StatusUnprocessableEntity, view{Errors: fe, Error: msg}, accountData{})
			return
		}
		_ = c.Error(err)
		return
	}
	w.setLangCookie(c, lang)
	c.Redirect(http.StatusSeeOther, "/account?msg=language-saved")
}
