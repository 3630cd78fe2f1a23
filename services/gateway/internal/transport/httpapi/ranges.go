package httpapi

import (
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// On link routes the gateway answers Range itself (docs/API.md, "Download limit"), so what an
// answer sends is decided before it takes its bytes from the file's budget: one range
// (bytes=a-b, bytes=a-, bytes=-n) is a 206; several ranges, an If-Range that does not
// match, a Range it cannot parse or of another unit are the whole file (200); a range
// no byte satisfies is 416. Multi-range answers are never sent, and the answer is
// written here, never by http.ServeContent.

// linkSpan is the part of f that an answer to r sends.
func linkSpan(r *http.Request, f app.File) (app.Span, error) {
	span, err := rangeSpan(r, f)
	span.Bodiless = r.Method == http.MethodHead || notModified(r, f)
	return span, err
}

// rangeSpan is the part of f that r's Range and If-Range ask for.
func rangeSpan(r *http.Request, f app.File) (app.Span, error) {
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

// notModified reports whether the answer to r is a 304 (RFC 9110 13.2.2): an
// If-None-Match naming the file's ETag (weakly) or "*", or without one, an
// If-Modified-Since not before its Last-Modified.
func notModified(r *http.Request, f app.File) bool {
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		etag := strings.TrimPrefix(etagOf(f), "W/")
		for tag := range strings.SplitSeq(inm, ",") {
			if tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/"); tag == "*" || tag == etag {
				return true
			}
		}
		return false
	}
	t, err := http.ParseTime(r.Header.Get("If-Modified-Since"))
	return err == nil && !f.CreatedAt.Truncate(time.Second).After(t)
}

func etagOf(f app.File) string { return `"` + f.SHA256 + `"` }

// serveSpan answers with span of f's bytes: 206 with Content-Range for one range, 200
// for the whole file, 304 when the request's validators say the client has it (a HEAD
// gets the headers alone). It writes the answer itself, never through
// http.ServeContent: what goes out is exactly the span the budget was charged for. It
// returns the meter of what the client acknowledged of the body.
func serveSpan(c *gin.Context, f app.File, span app.Span, obj app.Object) deliveryMeter {
	h := c.Writer.Header()
	h.Set("ETag", etagOf(f))
	h.Set("Last-Modified", f.CreatedAt.UTC().Format(http.TimeFormat))
	h.Set("Cache-Control", "private, no-store")
	if c.Request.Method != http.MethodHead && span.Bodiless {
		c.Status(http.StatusNotModified)
		c.Writer.WriteHeaderNow()
		return deliveryMeter{}
	}
	h.Set("Content-Type", f.ContentType)
	h.Set("Content-Disposition", attachment(f.Filename))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Length", strconv.FormatInt(span.Length, 10))
	status := http.StatusOK
	if span.Partial {
		status = http.StatusPartialContent
		h.Set("Content-Range", "bytes "+strconv.FormatInt(span.Start, 10)+"-"+strconv.FormatInt(span.Start+span.Length-1, 10)+"/"+strconv.FormatInt(f.Size, 10))
	}
	if span.Start > 0 {
		if _, err := obj.Seek(span.Start, io.SeekStart); err != nil {
			_ = c.Error(err)
			return deliveryMeter{}
		}
	}
	c.Status(status)
	c.Writer.WriteHeaderNow()
	if c.Request.Method == http.MethodHead || span.Length == 0 {
		return deliveryMeter{}
	}
	// The headers out first, so the meter counts the body alone.
	c.Writer.Flush()
	meter := startDeliveryMeter(c.Request)
	// A failed write is a client gone; sentOf tells the budget how far it got.
	_, _ = copySpan(c.Writer, obj, span.Length)
	return meter
}

// copyBufferSize is how much an answer reads from its object before it writes, at
// most. Full writes keep downloads cheap for the gateway and its client: io.Copy's
// 32 KiB costs a read and a write syscall per 32 KiB, each write waking the client for a
// little data, so the two spend more CPU per GiB than a client reading MinIO directly;
// with the buffer filled to 2 MiB before each write they spend about the same (the
// measurements: docs/BENCHMARKS.md, "Download, issue 21").
// It is also the memory of one download under way (pooled).
const copyBufferSize = 2 << 20

// copyBuffers are the answers' copy buffers.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

// copySpan copies n bytes of r to w, filling a pooled buffer of copyBufferSize (or
// what is left of n) before each write. It returns the bytes written.
func copySpan(w io.Writer, r io.Reader, n int64) (int64, error) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	var written int64
	for written < n {
		m, err := io.ReadFull(r, (*buf)[:min(int64(len(*buf)), n-written)])
		if m > 0 {
			k, werr := w.Write((*buf)[:m])
			written += int64(k)
			if werr != nil {
				return written, werr
			}
		}
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// settleSpan tells finish what the answer sent of its span, once that is known
// (settleDelivery): the body bytes of a 200 or 206 that its client acknowledged, whole
// when they are as many as its Content-Length (a 304 sends nothing). Not the request's
// context: a client that read the last byte may close the connection (cancelling the
// context) before the handler returns.
func settleSpan(c *gin.Context, meter deliveryMeter, finish app.Finish) {
	st := c.Writer.Status()
	if st != http.StatusOK && st != http.StatusPartialContent || c.Request.Method == http.MethodHead {
		meter.close()
		finish(app.Sent{})
		return
	}
	// gin's Size is -1 until something is written (an empty body).
	n := int64(max(c.Writer.Size(), 0))
	cl, err := strconv.ParseInt(c.Writer.Header().Get("Content-Length"), 10, 64)
	settleDelivery(meter, n, err != nil || n != cl, func(delivered int64, all bool) {
		finish(app.Sent{Bytes: delivered, Whole: all})
	})
}
