package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/httpx"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
)

// UploadLimits bound the upload routes (multipart uploads here, tus PATCH too).
type UploadLimits struct {
	// MaxConcurrent uploads in flight on this gateway; more are 503 (0: no limit).
	MaxConcurrent int
	// PerClient uploads in flight per token, per link, per browser session and per
	// user (all their tokens and sessions together); more are 429 (0: no limit).
	PerClient int
	// MinRate bytes a second over every RateWindow, else the body is cut off
	// (0: no minimum).
	MinRate    int64
	RateWindow time.Duration
}

// retryAfter sets Retry-After to d rounded up to whole seconds, at least 1.
func retryAfter(c *gin.Context, d time.Duration) {
	s := max(int(math.Ceil(d.Seconds())), 1)
	c.Header("Retry-After", strconv.Itoa(s))
}

// uploadGuard is the middleware of every upload route: it takes an in-flight slot
// for the gateway and for the client (the token or browser user, or the link) and
// makes the body keep the minimum rate. A client over its own limit gets 429, a
// gateway at its limit 503, both with Retry-After; a body cut off for being too slow
// gets 408 (the upload keeps nothing). tus PATCH routes use the same middleware.
func uploadGuard(l UploadLimits, reg prometheus.Registerer) gin.HandlerFunc {
	slots := httpx.NewInFlight(l.MaxConcurrent, l.PerClient)
	inFlight := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shipfile_uploads_in_flight",
		Help: "Uploads whose bodies the gateway is reading now.",
	})
	if reg != nil {
		reg.MustRegister(inFlight)
	}
	afterBurst := &burstMemory{}
	return func(c *gin.Context) {
		release, err := slots.Acquire(uploadKeys(c)...)
		switch {
		case errors.Is(err, httpx.ErrKeyBusy):
			retryAfter(c, time.Second)
			_ = c.Error(&httpError{status: http.StatusTooManyRequests, detail: "too many uploads in flight for this client; retry when one has finished"})
			c.Abort()
			return
		case err != nil:
			retryAfter(c, time.Second)
			_ = c.Error(&httpError{status: http.StatusServiceUnavailable, detail: "too many uploads in flight on this server; retry later"})
			c.Abort()
			return
		}
		inFlight.Inc()
		defer func() {
			release()
			inFlight.Dec()
			afterBurst.done(slots.InUse())
		}()
		afterBurst.seen(slots.InUse())
		body := httpx.MinRateBody(c.Request.Body, l.MinRate, l.RateWindow, httpx.ResponseDeadline(c.Writer))
		c.Request.Body = body
		c.Next()
		if httpx.TooSlow(body) {
			// Whatever the handler made of the broken body, the answer is why.
			c.Errors = c.Errors[:0]
			c.Header("Connection", "close")
			_ = c.Error(&httpError{status: http.StatusRequestTimeout, detail: "the upload was cut off: it sent fewer bytes a second than the server's minimum"})
		}
	}
}

// uploadKeys names the client of an upload: its token (or browser session), its
// user (every token and session of theirs together) and, on a link route, the link.
func uploadKeys(c *gin.Context) []string {
	var keys []string
	if id, ok := c.Get(ctxTokenID); ok {
		keys = append(keys, "token:"+strconv.FormatInt(id.(int64), 10))
	}
	if u := currentUser(c); u.ID != 0 {
		keys = append(keys, "user:"+strconv.FormatInt(u.ID, 10))
	}
	if tok := c.Param("token"); tok != "" {
		sum := sha256.Sum256([]byte(tok))
		keys = append(keys, "link:"+hex.EncodeToString(sum[:8]))
	}
	return keys
}

// linkGuard is the middleware of every link route of the API: first the client IP's
// request rate across every gateway instance (429 with Retry-After), then the link
// itself, so a dead link is 410 before any other check of the request. (The web
// UI's /p/ page takes the same rate itself.)
func linkGuard(l *links.Links, rate *links.LinkRate) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := rate.Take(c.Request.Context(), c.ClientIP()); err != nil {
			_ = c.Error(err)
			c.Abort()
			return
		}
		ctx, err := l.CheckLink(c.Request.Context(), c.Param("token"), client(c))
		if err != nil {
			_ = c.Error(err)
			c.Abort()
			return
		}
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

// burstMemory gives memory back to the operating system when a burst of uploads
// has ended: each upload in flight holds its own buffers and connection state, and
// the Go runtime would otherwise keep the freed heap of a burst (of stalled uploads,
// say) resident until its next forced collection, minutes later.
type burstMemory struct {
	mu   sync.Mutex
	peak int
	last time.Time
}

// burstSize is the smallest peak of uploads in flight after which memory is given
// back, and burstEvery the shortest time between two such returns.
const (
	burstSize  = 8
	burstEvery = 10 * time.Second
)

func (b *burstMemory) seen(inFlight int) {
	b.mu.Lock()
	b.peak = max(b.peak, inFlight)
	b.mu.Unlock()
}

func (b *burstMemory) done(inFlight int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if inFlight > 0 || b.peak < burstSize || time.Since(b.last) < burstEvery {
		return
	}
	b.peak, b.last = 0, time.Now()
	go debug.FreeOSMemory()
}
