package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/shipfile/shipfile/pkg/netguard"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

const (
	// excerptMax is how much of a response body the attempt log keeps.
	excerptMax = 1024
	// drainMax is how much more of a response body is read so its connection can be reused.
	drainMax = 64 << 10
)

// SenderOptions tune an HTTPSender.
type SenderOptions struct {
	// Timeout is the time a receiver has to answer, body included (default 10s).
	Timeout time.Duration
	// AllowPrivate lets deliveries reach loopback, private, link-local and other
	// internal addresses; off in production.
	AllowPrivate bool
}

// HTTPSender POSTs webhook requests. It follows no redirect (a 3xx is an answer, and a
// failure), uses no proxy, and unless AllowPrivate refuses at dial time every address
// netguard.Classify objects to.
//
// It uses fasthttp's client, whose caller does the connection's writes and reads
// itself: net/http's hands each request to a connection's writer goroutine and its
// answer back from a reader goroutine, and at thousands of deliveries a second that
// was half of the dispatcher's CPU. HTTP/1.1 only (as Svix and Stripe send webhooks).
type HTTPSender struct {
	client  *fasthttp.Client
	timeout time.Duration
}

var _ app.Sender = (*HTTPSender)(nil)

// NewSender returns an HTTPSender.
func NewSender(opts SenderOptions) *HTTPSender {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	guard := netguard.Guard{AllowPrivate: opts.AllowPrivate}.Control
	return &HTTPSender{
		client: &fasthttp.Client{
			DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
				d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: guard}
				return d.Dial("tcp", addr)
			},
			// A receiver may have up to its max_in_flight (≤ 256) requests under way, for
			// each subscription it has: past this many connections a request waits for one.
			MaxConnsPerHost:    1024,
			MaxConnWaitTimeout: opts.Timeout,
			// An idle connection is closed after 4 s, before the usual receivers close it
			// (Node's default is 5 s, nginx's 75 s); one closed sooner costs the one resend
			// of RetryIfErr.
			MaxIdleConnDuration: 4 * time.Second,
			// Response headers up to 16 KiB (net/http allows more; larger is an error).
			ReadBufferSize: 16 << 10,
			// The answer's body is streamed: its start is kept, a little more drained.
			StreamResponseBody: true,
			// A POST is sent again once, at once, only when a kept-alive connection turned
			// out to be closed by the receiver before an answer began (its idle timeout
			// and our reuse crossed): at least once holds, and the receiver dedupes by id.
			MaxIdemponentCallAttempts: 2,
			RetryIfErr: func(_ *fasthttp.Request, attempts int, err error) (bool, bool) {
				return false, attempts == 1 && staleConn(err)
			},
			// The request's own User-Agent only, and its URL's path as written.
			NoDefaultUserAgentHeader: true,
			DisablePathNormalizing:   true,
		},
		timeout: opts.Timeout,
	}
}

// staleConn says err is what a kept-alive connection closed by its server gives.
func staleConn(err error) bool {
	return errors.Is(err, fasthttp.ErrConnectionClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Send POSTs req, with the trace context of ctx as its traceparent header (startSend),
// and reports the answer. The whole exchange, reading the start of the
// body included, is bounded by the timeout (and by ctx's deadline, if sooner). When ctx
// is cancelled first (the dispatcher's grace period is over), Send returns at once with
// ctx's error, and the exchange goes on, to its deadline at most, on its own goroutine.
func (s *HTTPSender) Send(ctx context.Context, req app.Request) app.Response {
	start := time.Now()
	u, err := url.Parse(req.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return app.Response{Err: errors.New("invalid webhook URL: want an absolute http or https URL")}
	}
	deadline := start.Add(s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// The request is built here, its body copied: after an early return the caller may
	// reuse what req holds.
	hreq := fasthttp.AcquireRequest()
	hreq.SetRequestURI(req.URL)
	hreq.Header.SetMethod(http.MethodPost)
	for k, vs := range req.Header {
		for _, v := range vs {
			hreq.Header.Add(k, v)
		}
	}
	hreq.SetBody(req.Body)
	span := startSend(ctx, u, hreq)
	if ctx.Done() == nil {
		resp := s.exchange(hreq, start, deadline)
		endSend(span, resp)
		return resp
	}
	done := make(chan app.Response, 1)
	go func() { done <- s.exchange(hreq, start, deadline) }()
	var resp app.Response
	select {
	case resp = <-done:
	case <-ctx.Done():
		resp = app.Response{Err: ctx.Err(), Duration: time.Since(start)}
	}
	endSend(span, resp)
	return resp
}

// exchange sends hreq (and releases it) and reads the answer.
func (s *HTTPSender) exchange(hreq *fasthttp.Request, start, deadline time.Time) app.Response {
	hresp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(hreq)
	defer fasthttp.ReleaseResponse(hresp) // closes the body stream: the connection goes back or is closed
	if err := s.client.DoDeadline(hreq, hresp, deadline); err != nil {
		return app.Response{Err: s.describe(err), Duration: time.Since(start)}
	}
	// The excerpt is read into a buffer of the pool (most answers have a short body or
	// none); the rest is drained only when there is more, so the connection is reused.
	var excerpt string
	if body := hresp.BodyStream(); body != nil {
		buf := excerptBufs.Get().(*[excerptMax]byte)
		n, err := io.ReadFull(body, buf[:])
		excerpt = cleanExcerpt(buf[:n])
		excerptBufs.Put(buf)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(body, drainMax))
		}
	} else {
		b := hresp.Body()
		excerpt = cleanExcerpt(b[:min(len(b), excerptMax)])
	}
	return app.Response{
		StatusCode: hresp.StatusCode(),
		Duration:   time.Since(start),
		Excerpt:    excerpt,
		RetryAfter: parseRetryAfter(string(hresp.Header.Peek("Retry-After")), time.Now()),
	}
}

// excerptBufs hold the buffers responses' excerpts are read into.
var excerptBufs = sync.Pool{New: func() any { return new([excerptMax]byte) }}

// describe turns a client error into the attempt log's text, without the URL (which may
// carry credentials).
func (s *HTTPSender) describe(err error) error {
	if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrDialTimeout) {
		return fmt.Errorf("no response within %s", s.timeout)
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return fmt.Errorf("no response within %s", s.timeout)
	}
	// An https URL of a plain HTTP server: say so, as net/http does.
	if re, ok := errors.AsType[tls.RecordHeaderError](err); ok && string(re.RecordHeader[:]) == "HTTP/" {
		return http.ErrSchemeMismatch
	}
	return err
}

// cleanExcerpt makes b storable text: valid UTF-8 (a rune cut at the limit is dropped)
// without NUL bytes, which PostgreSQL text refuses.
func cleanExcerpt(b []byte) string {
	return strings.ReplaceAll(strings.ToValidUTF8(string(b), ""), "\x00", "")
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date. It returns
// 0 for an absent, malformed or past value.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(7*24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
