package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

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
type HTTPSender struct {
	client  *http.Client
	timeout time.Duration
}

var _ app.Sender = (*HTTPSender)(nil)

// NewSender returns an HTTPSender.
func NewSender(opts SenderOptions) *HTTPSender {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	dialer := &net.Dialer{Timeout: opts.Timeout, KeepAlive: 30 * time.Second}
	dialer.Control = netguard.Guard{AllowPrivate: opts.AllowPrivate}.Control
	tr := &http.Transport{
		Proxy:             nil, // never through a proxy: it would dial for us, past the guard
		DialContext:       dialer.DialContext,
		ForceAttemptHTTP2: true,
		// A receiver may have up to its max_in_flight (≤ 256) requests under way: keep
		// that many connections, or each burst opens (and leaves in TIME_WAIT) new ones.
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   opts.Timeout,
		ExpectContinueTimeout: time.Second,
	}
	return &HTTPSender{
		client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		timeout: opts.Timeout,
	}
}

// Send POSTs req and reports the answer. The whole exchange, reading the start of the
// body included, is bounded by the timeout.
func (s *HTTPSender) Send(ctx context.Context, req app.Request) app.Response {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// The URL is parsed once, by NewRequestWithContext, and checked there.
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, req.URL, bytes.NewReader(req.Body))
	if err != nil || (hreq.URL.Scheme != "http" && hreq.URL.Scheme != "https") || hreq.URL.Host == "" {
		return app.Response{Err: errors.New("invalid webhook URL: want an absolute http or https URL")}
	}
	// The request's own headers, built for this attempt: the client does not change them
	// (it copies them before adding any).
	hreq.Header = req.Header
	resp, err := s.client.Do(hreq)
	if err != nil {
		return app.Response{Err: s.describe(ctx, err), Duration: time.Since(start)}
	}
	defer resp.Body.Close()
	// The excerpt is read into a buffer of the pool (most answers have a short body or
	// none); the rest is drained only when there is more, so the connection is reused.
	buf := excerptBufs.Get().(*[excerptMax]byte)
	n, err := io.ReadFull(resp.Body, buf[:])
	excerpt := cleanExcerpt(buf[:n])
	excerptBufs.Put(buf)
	if err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainMax))
	}
	return app.Response{
		StatusCode: resp.StatusCode,
		Duration:   time.Since(start),
		Excerpt:    excerpt,
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
	}
}

// excerptBufs hold the buffers responses' excerpts are read into.
var excerptBufs = sync.Pool{New: func() any { return new([excerptMax]byte) }}

// describe turns a client error into the attempt log's text, without the URL (which may
// carry credentials).
func (s *HTTPSender) describe(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no response within %s", s.timeout)
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return fmt.Errorf("no response within %s", s.timeout)
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
