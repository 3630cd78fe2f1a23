package web

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

type recipientData struct {
	Package     app.Package
	Files       []app.File
	Token       string
	MaxFileSize int64
}

// recipient is the page behind a magic link: the note and the files to download
// (outbound), or a drop zone that uploads through the link (inbound). A dead link,
// whatever killed it, gets one generic page with 410. The token is in the URL, so the
// page sends no Referer anywhere.
func (w *Web) recipient(c *gin.Context) {
	c.Header("Referrer-Policy", "no-referrer")
	if err := w.linkRate.Take(c.Request.Context(), c.ClientIP()); err != nil {
		_ = c.Error(err)
		return
	}
	token := c.Param("token")
	p, files, err := w.packages.ViewLink(c.Request.Context(), token, client(c))
	if app.KindOf(err) == app.KindGone {
		w.render(c, http.StatusGone, "gone", view{Title: "Link no longer available"})
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	w.render(c, http.StatusOK, "recipient", view{Title: p.Title, D: recipientData{
		Package: p, Files: files, Token: token, MaxFileSize: w.cfg.MaxFileSize,
	}})
}
