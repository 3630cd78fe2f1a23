package web

import (
	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// swPath is where the download service worker of end-to-end encrypted packages is
// served (static/sw-e2e.js). It registers with the scope /e2e/, the URLs it answers
// with decrypted downloads; the server itself has no route there.
const swPath = "/sw-e2e.js"

// serviceWorker serves static/sw-e2e.js. Browsers check a worker's script for updates
// on their own; no-cache makes them ask this server each time.
func (w *Web) serviceWorker(c *gin.Context) {
	b, err := staticFS.ReadFile("static/sw-e2e.js")
	if err != nil {
		_ = c.Error(app.NotFound("file"))
		return
	}
	c.Header("Cache-Control", "no-cache")
	c.Data(200, "text/javascript; charset=utf-8", b)
}
