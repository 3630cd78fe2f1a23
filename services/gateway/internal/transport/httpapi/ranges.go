package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// On link routes the gateway answers Range itself (SPEC "Download limit"), so what an
// answer sends is decided before it takes its bytes from the file's budget: one range
// (bytes=a-b, bytes=a-, bytes=-n) is a 206; several ranges, an If-Range that does not
// match, a Range it cannot parse or of another unit are the whole file (200); a range
// no byte satisfies is 416. Multi-range answers are never sent.

// linkSpan is the part of f that an answer to r sends.
func linkSpan(r *http.Request, f app.File) (app.Span, error) {
	whole := app.WholeFile(f)
	rng := r.Header.Get("Range")
	if rng == "" || !ifRangeMatches(r.Header.Get("If-Range"), f) {
		return whole, nil
	}
	unit, set, ok := strings.Cut(rng, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(unit), "bytes") {
		return whole, nil
	}
	var specs []string
	for s := range strings.SplitSeq(set, ",") {
		if s = strings.TrimSpace(s); s != "" {
			specs = append(specs, s)
		}
	}
	if len(specs) != 1 {
		return whole, nil // several ranges (or none): the whole file
	}
	first, last, ok := strings.Cut(specs[0], "-")
	if !ok {
		return whole, nil
	}
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	size := f.Size
	unsatisfiable := &app.RangeNotSatisfiableError{Size: size}
	if first == "" {
		// bytes=-n: the last n bytes.
		n, ok := digits(last)
		if !ok {
			return whole, nil
		}
		if n == 0 || size == 0 {
			return app.Span{}, unsatisfiable
		}
		n = min(n, size)
		return app.Span{Start: size - n, Length: n, Partial: true}, nil
	}
	start, ok := digits(first)
	if !ok {
		return whole, nil
	}
	end := int64(math.MaxInt64)
	if last != "" {
		if end, ok = digits(last); !ok || end < start {
			return whole, nil
		}
	}
	if start >= size {
		return app.Span{}, unsatisfiable
	}
	end = min(end, size-1)
	return app.Span{Start: start, Length: end - start + 1, Partial: true}, nil
}

// digits parses a run of decimal digits (leading zeros allowed), saturating at the
// largest int64 rather than failing.
func digits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (math.MaxInt64-9)/10 {
			n = math.MaxInt64
			continue
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// ifRangeMatches reports whether a Range applies under If-Range (RFC 9110 13.1.5):
// there is none, or it is the file's strong ETag, or its Last-Modified date.
func ifRangeMatches(ifRange string, f app.File) bool {
	ifRange = strings.TrimSpace(ifRange)
	switch {
	case ifRange == "":
		return true
	case strings.HasPrefix(ifRange, `"`):
		return ifRange == etagOf(f)
	case strings.HasPrefix(ifRange, "W/"):
		return false // a weak validator never matches
	}
	t, err := http.ParseTime(ifRange)
	return err == nil && t.Unix() == f.CreatedAt.Truncate(time.Second).Unix()
}

func etagOf(f app.File) string { return `"` + f.SHA256 + `"` }

// serveSpan answers with span of f's bytes: 206 with Content-Range for one range, 200
// for the whole file. http.ServeContent writes it and answers the other conditional
// headers (If-None-Match: 304, If-Match: 412), but it is handed a request whose Range
// names the span alone and whose If-Range is gone: the decision is ours.
func serveSpan(c *gin.Context, f app.File, span app.Span, obj app.Object) {
	r := c.Request.Clone(c.Request.Context())
	r.Header.Del("If-Range")
	r.Header.Del("Range")
	if span.Partial {
		r.Header.Set("Range", "bytes="+strconv.FormatInt(span.Start, 10)+"-"+strconv.FormatInt(span.Start+span.Length-1, 10))
	}
	w := c.Writer
	w.Header().Set("Content-Type", f.ContentType)
	w.Header().Set("Content-Disposition", attachment(f.Filename))
	w.Header().Set("ETag", etagOf(f))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "private, no-store")
	http.ServeContent(w, r, "", f.CreatedAt, obj)
}

// sentOf is what the answer sent of its span: the body bytes written of a 200 or 206,
// whole when they are as many as its Content-Length (a 304 or 412 sends nothing; a cut
// connection fails a write). Not the request's context: a client that read the last
// byte may close the connection (cancelling the context) before the handler returns.
func sentOf(c *gin.Context) app.Sent {
	st := c.Writer.Status()
	if st != http.StatusOK && st != http.StatusPartialContent {
		return app.Sent{}
	}
	// gin's Size is -1 until something is written (an empty body).
	n := int64(max(c.Writer.Size(), 0))
	cl, err := strconv.ParseInt(c.Writer.Header().Get("Content-Length"), 10, 64)
	return app.Sent{Bytes: n, Whole: err == nil && n == cl && c.Request.Method != http.MethodHead}
}
