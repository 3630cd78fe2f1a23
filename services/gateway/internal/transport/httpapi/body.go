package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/pkg/httpx"
)

// BodyLimits bound how a request body of every route but the uploads may arrive
// (408: docs/API.md, "States and errors"; SHIPFILE_HTTP_BODY_TIMEOUT in
// docs/CONFIGURATION.md): JSON and forms are small, so a
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

// guardKey is the gin context key of a request's guarded body.
const guardKey = "shipfile.bodyGuard"

// errBodyCutOff answers a body cut off for being too slow or too long in coming.
var errBodyCutOff = &httpError{status: http.StatusRequestTimeout,
	detail: "the request body was cut off: it came slower than the server's minimum rate or took longer than its time limit"}

// bodyGuard bounds the body of every request but an upload's under the minimum rate
// and the time limit, and reads nothing itself: the body is read ahead whole (up to
// MaxBytes) at its first Read, that is once the route's own middleware (a token or
// session, the link's rate and dead-link checks) has let the request through to the
// part that wants the body. An unknown route, a refused credential or a dead link is
// answered without a byte of the body read. A body cut off for being too slow is
// answered 408 with Connection: close, whatever the handler made of the failed read,
// and before the handler has anything of the body to act on. Upload routes (multipart
// uploads and tus) stream their bodies under their own rules (uploadGuard).
func bodyGuard(l BodyLimits) gin.HandlerFunc {
	limit := max(l.MaxBytes, minReadAhead)
	return func(c *gin.Context) {
		r := c.Request
		if (l.Timeout <= 0 && (l.MinRate <= 0 || l.RateWindow <= 0)) || r.Body == nil || r.Body == http.NoBody || isUploadRoute(c) {
			c.Next()
			return
		}
		// The time limit counts from the request's arrival, not from the first Read.
		g := &guardedBody{body: httpx.LimitBody(r.Body, l.MinRate, l.RateWindow, l.Timeout, httpx.ResponseDeadline(c.Writer)), limit: limit}
		r.Body = g
		c.Set(guardKey, g)
		c.Next()
		if g.cutOff() && !c.Writer.Written() {
			c.Errors = c.Errors[:0]
			c.Header("Connection", "close")
			_ = c.Error(errBodyCutOff)
			c.Abort()
		}
	}
}

// guardedBody is a JSON or form body that is read ahead whole at its first Read.
type guardedBody struct {
	body  io.ReadCloser // under httpx.LimitBody
	limit int64

	once sync.Once
	r    io.Reader // what the reads get once read ahead
	cut  atomic.Bool
	read atomic.Bool
}

func (g *guardedBody) Read(p []byte) (int, error) {
	g.once.Do(g.readAhead)
	return g.r.Read(p)
}

func (g *guardedBody) readAhead() {
	g.read.Store(true)
	head, err := io.ReadAll(io.LimitReader(g.body, g.limit+1))
	switch {
	case httpx.TooSlow(g.body):
		g.cut.Store(true)
		g.r = errReader{httpx.ErrTooSlow}
	case err != nil:
		g.r = io.MultiReader(bytes.NewReader(head), errReader{err})
	case int64(len(head)) > g.limit: // too long for any of these routes: its handler says so
		g.r = io.MultiReader(bytes.NewReader(head), g.body)
	default:
		g.r = bytes.NewReader(head)
	}
}

func (g *guardedBody) Close() error { return g.body.Close() }

// cutOff reports whether the body was cut off for being too slow.
func (g *guardedBody) cutOff() bool { return g.cut.Load() }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// closeIfBodyUnread closes the connection after an answer to a request whose guarded
// body nobody read, without reading on: net/http would otherwise read up to 256 KiB
// of what is left of it, for as long as the client takes to send them, to keep the
// connection (before the answer, or after it for a chunked body).
func closeIfBodyUnread(c *gin.Context) {
	if v, ok := c.Get(guardKey); ok && !v.(*guardedBody).read.Load() {
		c.Header("Connection", "close")
		_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now())
	}
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
