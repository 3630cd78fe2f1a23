package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/pkg/httpx"
)

// BodyLimits bound how a request body of every route but the uploads may arrive
// (SPEC "Hostile clients", slow request bodies): JSON and forms are small, so a
// client that trickles one holds a connection and a goroutine for nothing.
type BodyLimits struct {
	// MinRate bytes a second over every RateWindow, as for uploads (0: no minimum).
	MinRate    int64
	RateWindow time.Duration
	// Timeout is the longest a whole body may take to arrive (0: no limit).
	Timeout time.Duration
	// MaxBytes is how much of a body is read ahead; a longer body is left to its
	// handler (which answers 413).
	MaxBytes int64
}

// minReadAhead is the least read ahead: the web UI's forms take up to 64 KiB.
const minReadAhead = 64 << 10

// bodyGuard reads the body of every request but an upload's before its handler
// runs, under the minimum rate and the time limit: a body cut off for being too slow
// is answered 408 with Connection: close, whatever the route, before anything of
// the request is done. The handler then reads the body from memory. Upload routes
// (multipart uploads and tus) stream their bodies under their own rules
// (uploadGuard).
func bodyGuard(l BodyLimits) gin.HandlerFunc {
	limit := max(l.MaxBytes, minReadAhead)
	return func(c *gin.Context) {
		r := c.Request
		if (l.Timeout <= 0 && (l.MinRate <= 0 || l.RateWindow <= 0)) || r.Body == nil || r.Body == http.NoBody || isUploadRoute(c) {
			c.Next()
			return
		}
		body := httpx.LimitBody(r.Body, l.MinRate, l.RateWindow, l.Timeout, httpx.ResponseDeadline(c.Writer))
		head, err := io.ReadAll(io.LimitReader(body, limit+1))
		switch {
		case httpx.TooSlow(body):
			c.Header("Connection", "close")
			_ = c.Error(&httpError{status: http.StatusRequestTimeout,
				detail: "the request body was cut off: it came slower than the server's minimum rate or took longer than its time limit"})
			c.Abort()
			return
		case err != nil:
			c.Header("Connection", "close")
			_ = c.Error(&httpError{status: http.StatusBadRequest, detail: "the request body could not be read"})
			c.Abort()
			return
		}
		rest := io.Reader(http.NoBody)
		if int64(len(head)) > limit {
			rest = body // too long for any of these routes: its handler says so
		}
		r.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(head), rest), Closer: body}
		c.Next()
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// isUploadRoute reports the routes whose bodies are file contents: multipart uploads
// (POST …/files) and tus creations and PATCHes (…/uploads[/{upload_id}]).
func isUploadRoute(c *gin.Context) bool {
	m, p := c.Request.Method, c.FullPath()
	switch {
	case m == http.MethodPost && strings.HasPrefix(p, "/api/v1/") && strings.HasSuffix(p, "/files"):
		return true
	case (m == http.MethodPost || m == http.MethodPatch) && isTusPath(p):
		return true
	}
	return false
}
