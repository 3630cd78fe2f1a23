package httpapi

import (
	"errors"
	"html/template"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	api "github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
)

// statusOf maps an application error kind to its HTTP status.
var statusOf = map[app.Kind]int{
	app.KindInternal:         http.StatusInternalServerError,
	app.KindInvalid:          http.StatusUnprocessableEntity,
	app.KindUnauthenticated:  http.StatusUnauthorized,
	app.KindForbidden:        http.StatusForbidden,
	app.KindNotFound:         http.StatusNotFound,
	app.KindConflict:         http.StatusConflict,
	app.KindGone:             http.StatusGone,
	app.KindTooLarge:         http.StatusRequestEntityTooLarge,
	app.KindBadRequest:       http.StatusBadRequest,
	app.KindTooMany:          http.StatusTooManyRequests,
	app.KindBusy:             http.StatusServiceUnavailable,
	app.KindTimeout:          http.StatusRequestTimeout,
	app.KindLocked:           http.StatusLocked,
	app.KindChecksumMismatch: 460, // tus checksum extension: "Checksum Mismatch"
}

// httpError is an error raised by the transport itself with a status that has no
// application kind (405, 415, 429).
type httpError struct {
	status int
	detail string
}

func (e *httpError) Error() string { return e.detail }

// errorMiddleware is the one place that turns errors into answers: handlers call
// c.Error(err) and return; after the chain runs, the last error is written as
// {"detail": "..."} (or an HTML page outside /api/). Errors that say PostgreSQL or the
// object store cannot be reached are answered 503 with Retry-After; unknown errors are
// logged in full and answered 500 with a plain message.
func errorMiddleware(log *slog.Logger, pages Pages) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Next()
		if len(c.Errors) == 0 || c.Writer.Written() {
			return
		}
		writeError(c, log, pages, c.Errors.Last().Err)
	}
}

func writeError(c *gin.Context, log *slog.Logger, pages Pages, err error) {
	status, detail := classify(err)
	if c.Writer.Written() {
		// The answer has started (a stream failed midway): it cannot change now.
		log.Error("request failed after the answer started", "route", c.FullPath(), "err", err)
		c.Abort()
		return
	}
	if status == http.StatusInternalServerError {
		log.Error("request failed", "route", c.FullPath(), "method", c.Request.Method, "err", err)
	}
	var ae *app.Error
	switch {
	case errors.As(err, &ae) && (ae.Kind == app.KindTooMany || ae.Kind == app.KindBusy || ae.RetryAfter > 0):
		// A limit of the gateway's own, not an outage; or a state that passes (a file
		// still being checked for malware: 409).
		retryAfter(c, ae.RetryAfter)
	case status == http.StatusServiceUnavailable:
		log.Warn("request failed: a backing service is unavailable", "route", c.FullPath(), "method", c.Request.Method, "err", err)
		c.Header("Retry-After", "5")
	}
	var rne *app.RangeNotSatisfiableError
	if errors.As(err, &rne) {
		c.Header("Content-Range", "bytes */"+strconv.FormatInt(rne.Size, 10))
	}
	var te *links.LinkThrottledError
	if errors.As(err, &te) {
		c.Header("Retry-After", strconv.Itoa(int(math.Ceil(te.RetryAfter.Seconds()))))
	}
	if status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Bearer realm="shipfile"`)
	}
	closeIfBodyUnread(c)
	if isAPI(c) {
		var sh *app.ScanHeldError
		if errors.As(err, &sh) {
			// A download the malware scan holds back names the scan's state.
			scan := api.ScanHeldScan(sh.Scan)
			c.AbortWithStatusJSON(status, api.ScanHeld{Detail: detail, Scan: &scan})
			return
		}
		c.AbortWithStatusJSON(status, api.Error{Detail: detail})
		return
	}
	c.Abort()
	if pages != nil {
		pages.ErrorPage(c, status, detail)
		return
	}
	c.Status(status)
	c.Header("Content-Type", "text/html; charset=utf-8")
	_ = errorPage.Execute(c.Writer, map[string]any{"Status": status, "Title": http.StatusText(status), "Detail": detail})
}

func classify(err error) (int, string) {
	var he *httpError
	if errors.As(err, &he) {
		return he.status, he.detail
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge, "request body too large"
	}
	var te *links.LinkThrottledError
	if errors.As(err, &te) {
		return http.StatusTooManyRequests, te.Detail
	}
	var rne *app.RangeNotSatisfiableError
	if errors.As(err, &rne) {
		return http.StatusRequestedRangeNotSatisfiable, rne.Error()
	}
	var ae *app.Error
	if errors.As(err, &ae) {
		return statusOf[ae.Kind], ae.Detail
	}
	if database.IsUnavailable(err) || storage.IsUnavailable(err) {
		return http.StatusServiceUnavailable, "temporarily unavailable: the database or the object store does not answer; retry later"
	}
	return http.StatusInternalServerError, "internal server error"
}

func isAPI(c *gin.Context) bool {
	return strings.HasPrefix(c.Request.URL.Path, "/api/")
}

// recovery answers a panic with a plain 500, never a stack trace.
func recovery(log *slog.Logger, pages Pages) gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, rec any) {
		if rec == http.ErrAbortHandler {
			panic(rec) // let net/http cut the connection of a stream that failed midway
		}
		log.Error("panic", "route", c.FullPath(), "method", c.Request.Method, "panic", rec)
		writeError(c, log, pages, errors.New("panic"))
	})
}

func notFound(c *gin.Context) {
	_ = c.Error(&httpError{status: http.StatusNotFound, detail: "not found"})
}

func methodNotAllowed(c *gin.Context) {
	// gin answers an unrouted method outside the route groups, so the tus groups'
	// middleware never sees it; tus wants Tus-Resumable on every answer of its URLs.
	if isTusPath(c.Request.URL.Path) {
		c.Header("Tus-Resumable", tusVersion)
	}
	_ = c.Error(&httpError{status: http.StatusMethodNotAllowed, detail: "method not allowed"})
}

var errorPage = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Status}} {{.Title}} · shipfile</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;color:#222}</style>
</head><body><h1>{{.Title}}</h1><p>{{.Detail}}</p><p><a href="/">shipfile</a></p></body></html>
`))
