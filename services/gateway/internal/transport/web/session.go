package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// CSRFHeader carries the CSRF token of API calls made by the UI's script.
const CSRFHeader = "X-CSRF-Token"

// csrfField is the hidden form field that carries the CSRF token.
const csrfField = "_csrf"

const (
	ctxUser    = "shipfile.web.user"
	ctxSession = "shipfile.web.session"
)

// cookieNames are the UI's cookie names: with Secure cookies they take the __Host-
// prefix, which browsers accept only from HTTPS, for path / and without a domain, so
// neither a sibling domain nor plain HTTP can plant or overwrite them.
type cookieNames struct {
	session, csrf string
	secure        bool
}

func newCookieNames(secure bool) cookieNames {
	if secure {
		return cookieNames{session: "__Host-shipfile_session", csrf: "__Host-shipfile_csrf", secure: true}
	}
	return cookieNames{session: "shipfile_session", csrf: "shipfile_csrf"}
}

func (w *Web) setCookie(c *gin.Context, name, value string, maxAge int) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: w.cookies.secure, SameSite: http.SameSiteLaxMode,
	})
}

// load puts the signed-in user, if any, in the context. Pages are personal: no page
// is kept in a shared cache.
func (w *Web) load(c *gin.Context) {
	c.Header("Cache-Control", "private, no-store")
	raw, err := c.Cookie(w.cookies.session)
	if err == nil && raw != "" {
		u, _, err := w.sessions.Resolve(c.Request.Context(), raw)
		switch {
		case err == nil:
			c.Set(ctxUser, u)
			c.Set(ctxSession, raw)
		case errors.Is(err, app.ErrUnauthenticated):
			w.setCookie(c, w.cookies.session, "", -1)
		default:
			_ = c.Error(err)
			c.Abort()
			return
		}
	}
	c.Next()
}

func currentUser(c *gin.Context) (app.User, bool) {
	v, ok := c.Get(ctxUser)
	if !ok {
		return app.User{}, false
	}
	u, ok := v.(app.User)
	return u, ok
}

// requireUser sends visitors without a session to the sign-in page (or to the setup
// page while no user exists).
func (w *Web) requireUser(c *gin.Context) {
	if _, ok := currentUser(c); ok {
		c.Next()
		return
	}
	setup, err := w.identity.NeedsSetup(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		c.Abort()
		return
	}
	target := "/login"
	if setup {
		target = "/setup"
	} else if c.Request.Method == http.MethodGet && c.Request.URL.RequestURI() != "/" {
		target += "?next=" + url.QueryEscape(c.Request.URL.RequestURI())
	}
	c.Redirect(http.StatusSeeOther, target)
	c.Abort()
}

// requireAdmin answers 403 to users without the admin role.
func (w *Web) requireAdmin(c *gin.Context) {
	if u, _ := currentUser(c); !u.IsAdmin() {
		_ = c.Error(app.Forbidden("this page is for administrators"))
		c.Abort()
		return
	}
	c.Next()
}

// csrfToken is the CSRF token of this browser: derived from the session id when
// signed in, else from a random cookie set here. The token is an HMAC of the cookie's
// secret value, so a page on another site can neither read nor compute it.
func (w *Web) csrfToken(c *gin.Context) string {
	if raw, ok := c.Get(ctxSession); ok {
		return deriveCSRF(raw.(string))
	}
	v, err := c.Cookie(w.cookies.csrf)
	if err != nil || len(v) != 43 {
		v = rand.Text() + rand.Text()[:17] // 43 characters, 215 bits
		w.setCookie(c, w.cookies.csrf, v, 0)
		// Later reads in this request see the new value.
		c.Request.AddCookie(&http.Cookie{Name: w.cookies.csrf, Value: v})
	}
	return deriveCSRF(v)
}

func deriveCSRF(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("shipfile csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// expectedCSRF is the token a form of this browser must carry; "" when the browser
// has neither a session nor the CSRF cookie, so nothing matches.
func (w *Web) expectedCSRF(c *gin.Context) string {
	if raw, ok := c.Get(ctxSession); ok {
		return deriveCSRF(raw.(string))
	}
	v, err := c.Cookie(w.cookies.csrf)
	if err != nil || len(v) != 43 {
		return ""
	}
	return deriveCSRF(v)
}

// checkCSRF refuses a form post that comes from another origin or lacks this
// browser's CSRF token. The form body is bounded, as uploads never come here.
func (w *Web) checkCSRF(c *gin.Context) {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxFormBytes)
	if err := w.origin.Check(c.Request); err != nil {
		_ = c.Error(app.Forbidden("cross-origin form posts are refused"))
		c.Abort()
		return
	}
	got := c.PostForm(csrfField)
	if got == "" {
		got = c.GetHeader(CSRFHeader)
	}
	want := w.expectedCSRF(c)
	if want == "" || !hmac.Equal([]byte(got), []byte(want)) {
		_ = c.Error(app.Forbidden("this form has expired or did not come from this site; reload the page and try again"))
		c.Abort()
		return
	}
	c.Next()
}

// SessionUser authenticates an API request by the session cookie, for the UI's own
// calls (uploads with progress, owner downloads). ok is false when the request has no
// valid session. An unsafe method must also come from this origin and carry the
// session's CSRF token in X-CSRF-Token; otherwise it is refused with 403.
func (w *Web) SessionUser(c *gin.Context) (app.User, bool, error) {
	raw, err := c.Cookie(w.cookies.session)
	if err != nil || raw == "" {
		return app.User{}, false, nil
	}
	u, _, err := w.sessions.Resolve(c.Request.Context(), raw)
	if errors.Is(err, app.ErrUnauthenticated) {
		return app.User{}, false, nil
	}
	if err != nil {
		return app.User{}, false, err
	}
	switch c.Request.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if err := w.origin.Check(c.Request); err != nil {
			return app.User{}, false, app.Forbidden("cross-origin requests with the session cookie are refused")
		}
		got := c.GetHeader(CSRFHeader)
		if !hmac.Equal([]byte(got), []byte(deriveCSRF(raw))) {
			return app.User{}, false, app.Forbidden("requests authenticated by the session cookie need the " + CSRFHeader + " header")
		}
	}
	return u, true, nil
}

// localPath returns next when it is a same-origin path, else "/": a sign-in must not
// redirect elsewhere. It must start with exactly one "/", and hold no "//", no
// backslash, no control or format character and no scheme: browsers drop tabs and
// newlines from a URL and read a backslash as "/", so "/<tab>/evil.example" would
// leave the site.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/") || len(next) > 2048 || strings.Contains(next, "//") ||
		strings.Contains(next, "\\") || !utf8.ValidString(next) ||
		strings.ContainsFunc(next, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError }) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	return next
}
