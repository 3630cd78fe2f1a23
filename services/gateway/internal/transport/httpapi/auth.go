package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
)

const (
	ctxUser    = "shipfile.user"
	ctxTokenID = "shipfile.token_id"
	// ctxTokenExpires is the expiry (*time.Time, nil: never) of the bearer token that
	// authenticated the request; absent for a browser session.
	ctxTokenExpires = "shipfile.token_expires"
)

// authenticate requires a valid bearer token and puts its user in the context.
// Without an Authorization header, the web UI's session cookie is accepted too (with
// its CSRF token on unsafe methods), so the UI's pages call the same endpoints.
func authenticate(id *identity.Identity, pages Pages) gin.HandlerFunc {
	return func(c *gin.Context) {
		raw, ok := bearer(c.GetHeader("Authorization"))
		if !ok && c.GetHeader("Authorization") == "" && pages != nil {
			u, ok, err := pages.SessionUser(c)
			if err != nil {
				_ = c.Error(err)
				c.Abort()
				return
			}
			if ok {
				c.Set(ctxUser, u)
				// Rate-limit browser sessions per user, apart from every token id.
				c.Set(ctxTokenID, -u.ID)
				c.Next()
				return
			}
		}
		if !ok {
			_ = c.Error(app.ErrUnauthenticated)
			c.Abort()
			return
		}
		owner, err := id.AuthenticateToken(c.Request.Context(), raw)
		if err != nil {
			_ = c.Error(err)
			c.Abort()
			return
		}
		c.Set(ctxUser, owner.User)
		c.Set(ctxTokenID, owner.TokenID)
		c.Set(ctxTokenExpires, owner.ExpiresAt)
		c.Next()
	}
}

func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// requireAdmin answers 403 for users without the admin role.
func requireAdmin(c *gin.Context) {
	if !currentUser(c).IsAdmin() {
		_ = c.Error(app.Forbidden("admin role required"))
		c.Abort()
		return
	}
	c.Next()
}

func currentUser(c *gin.Context) app.User {
	u, _ := c.Get(ctxUser)
	user, _ := u.(app.User)
	return user
}

// limiter is a per-token request rate limit (token bucket), held in memory by each
// gateway instance.
type limiter struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[int64]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// idleBucket is how long an unused token's bucket is kept.
const idleBucket = 10 * time.Minute

func newLimiter(perSecond float64, burst int) *limiter {
	return &limiter{rate: rate.Limit(perSecond), burst: burst, buckets: map[int64]*bucket{}, swept: time.Now()}
}

// reserve takes one request from the token's bucket and reports how long the caller
// must wait when it is empty.
func (l *limiter) reserve(tokenID int64, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > idleBucket {
		for id, b := range l.buckets {
			if now.Sub(b.seen) > idleBucket {
				delete(l.buckets, id)
			}
		}
		l.swept = now
	}
	b, ok := l.buckets[tokenID]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[tokenID] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if delay := r.DelayFrom(now); delay > 0 {
		r.CancelAt(now)
		return delay, false
	}
	return 0, true
}

// rateLimit answers 429 with Retry-After when a token goes over its rate.
func rateLimit(l *limiter) gin.HandlerFunc {
	return func(c *gin.Context) {
		if l == nil || l.rate <= 0 {
			c.Next()
			return
		}
		id, _ := c.Get(ctxTokenID)
		tokenID, _ := id.(int64)
		if wait, ok := l.reserve(tokenID, time.Now()); !ok {
			c.Header("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			_ = c.Error(&httpError{status: http.StatusTooManyRequests, detail: "rate limit exceeded; retry later"})
			c.Abort()
			return
		}
		c.Next()
	}
}
