package web

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
)

type recipientData struct {
	Package     app.Package
	Files       []recipientFile
	Token       string
	MaxFileSize int64
	// PublicKey is the owner's age public key an encrypted request's uploads are
	// encrypted to in the browser ("" otherwise).
	PublicKey string
	// Sender is the package's owner; nil when unknown.
	Sender *sender
}

// recipientFile is a file on the recipient's page with the downloads the link has left
// for it.
// sender is the package's owner as the recipient's page names them.
type sender struct{ Name, Email string }

type recipientFile struct {
	app.File
	Limited bool // the package has a download limit
	Left    int  // downloads left when Limited
	fileScan
}

// unlockData is the password form of a protected link: nothing of the package.
type unlockData struct {
	Token string
}

// linkCookie is the cookie holding a protected link's grant (docs/API.md, "Protected links").
const linkCookie = "shipfile_link"

// recipient is the page behind a magic link: the note and the files to download
// (outbound), or a drop zone that uploads through the link (inbound). A dead link,
// whatever killed it, gets one generic page with 410; a protected link without a
// grant gets only the password form. The token is in the URL, so the page sends no
// Referer anywhere.
func (w *Web) recipient(c *gin.Context) {
	c.Header("Referrer-Policy", "no-referrer")
	token := c.Param("token")
	p, files, err := w.links.ViewLink(c.Request.Context(), token, client(c))
	if app.KindOf(err) == app.KindGone {
		w.render(c, http.StatusGone, "gone", view{Title: "Link no longer available"})
		return
	}
	if errors.Is(err, links.ErrLinkLocked) {
		w.render(c, http.StatusOK, "unlock", view{Title: "Password required", D: unlockData{Token: token}})
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	d := recipientData{Package: p, Token: token, MaxFileSize: w.cfg.MaxFileSize, Files: make([]recipientFile, len(files)), PublicKey: p.OwnerPublicKey}
	// Who sent the files (or asked for them): the owner's name and address. A page
	// without it is still a page: the files matter more.
	if owner, err := w.identity.User(c.Request.Context(), p.OwnerUserID); err == nil {
		d.Sender = &sender{Name: owner.Name, Email: owner.Email}
	}
	for i, f := range files {
		d.Files[i] = recipientFile{File: f, fileScan: fileScan{ScanText: app.ScanText(f), Held: scanHeld(w.packages.LinkScanCheck(f))}}
		if left := f.DownloadsLeft(p.MaxDownloads); left != nil {
			d.Files[i].Limited, d.Files[i].Left = true, *left
		}
	}
	w.render(c, http.StatusOK, "recipient", view{Title: p.Title, D: d})
}

// unlock takes the password form of a protected link: the right password sets the
// shipfile_link cookie and shows the page; a wrong one shows the form again (401), too
// many wrong ones 429.
func (w *Web) unlock(c *gin.Context) {
	c.Header("Referrer-Policy", "no-referrer")
	token := c.Param("token")
	grant, exp, err := w.links.Unlock(c.Request.Context(), token, c.PostForm("password"), client(c))
	var te *links.LinkThrottledError
	switch {
	case err == nil:
		for _, path := range []string{"/p/" + token, "/api/v1/links/" + token} {
			http.SetCookie(c.Writer, &http.Cookie{
				Name: linkCookie, Value: grant, Path: path, Expires: exp, MaxAge: int(time.Until(exp).Seconds()),
				HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: w.cfg.SecureCookies,
			})
		}
		c.Redirect(http.StatusSeeOther, "/p/"+token)
	case app.KindOf(err) == app.KindGone:
		w.render(c, http.StatusGone, "gone", view{Title: "Link no longer available"})
	case errors.Is(err, links.ErrWrongPassword):
		w.render(c, http.StatusUnauthorized, "unlock", view{Title: "Password required", Error: "Wrong password.", D: unlockData{Token: token}})
	case errors.As(err, &te):
		mins := int(math.Ceil(te.RetryAfter.Minutes()))
		c.Header("Retry-After", strconv.Itoa(int(math.Ceil(te.RetryAfter.Seconds()))))
		w.render(c, http.StatusTooManyRequests, "unlock", view{Title: "Password required",
			Error: fmt.Sprintf("Too many wrong passwords. Try again in %d minute(s).", mins), D: unlockData{Token: token}})
	case app.KindOf(err) == app.KindConflict:
		c.Redirect(http.StatusSeeOther, "/p/"+token) // no password (any more): the page opens
	default:
		_ = c.Error(err)
	}
}

// linkRateGuard takes one request from the client IP's link rate (SHIPFILE_LINK_RATE,
// shared with the API's link routes) before the recipient's page or its unlock form
// does anything else: 429 with Retry-After over the rate.
func (w *Web) linkRateGuard(c *gin.Context) {
	if err := w.linkRate.Take(c.Request.Context(), c.ClientIP()); err != nil {
		_ = c.Error(err)
		c.Abort()
		return
	}
	c.Next()
}
