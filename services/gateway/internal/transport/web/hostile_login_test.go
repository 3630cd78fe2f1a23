package web_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/service"
)

// TestLoginLongEmail: an e-mail address over 254 bytes is a failed sign-in like any
// other, 401 and then 429, never a 500 (docs/WEB-UI.md, "Sessions"); every throttle key
// stored stays short, well within PostgreSQL's index row limit.
func TestLoginLongEmail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.maxFailures = 3 })
	e.user("ann@example.com", app.RoleRegular)
	b := e.browser()
	b.get("/login")
	for _, n := range []int{300, 3000, 40000} {
		// Random letters: PostgreSQL compresses a repeated one small enough to index.
		local := make([]byte, n)
		for i := range local {
			local[i] = byte('a' + rand.IntN(26))
		}
		email := string(local) + "@example.com"
		for i := range 4 {
			want := http.StatusUnauthorized
			if i == 3 {
				want = http.StatusTooManyRequests // the address's own count
			}
			expectStatus(t, b.post("/login", url.Values{"email": {email}, "password": {"a wrong password"}}), want)
			// The IP's count is cleared so that only the address's counts.
			if _, err := e.pool.Exec(context.Background(), "DELETE FROM login_throttle WHERE key LIKE 'ip:%'"); err != nil {
				t.Fatal(err)
			}
		}
	}
	var longest int
	if err := e.pool.QueryRow(context.Background(), "SELECT max(octet_length(key)) FROM login_throttle").Scan(&longest); err != nil || longest > 300 {
		t.Fatalf("longest throttle key = %d bytes (%v), want short keys", longest, err)
	}
	// The user's own sign-in still works.
	b.login("ann@example.com")
}

// TestLoginThrottleSwept: counts of the past go without anyone signing in
// successfully (docs/WEB-UI.md, "Sessions"): the gateway's sweeper
// forgets every count whose window and lock are over, and keeps those still running.
func TestLoginThrottleSwept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ann@example.com", app.RoleRegular)
	b := e.browser()
	b.get("/login")
	for i := range 20 {
		p := b.post("/login", url.Values{"email": {fmt.Sprintf("guess%d@example.com", i)}, "password": {"a wrong password"}})
		if p.status != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, p.status)
		}
		// The IP's count locks after 5; forget it to go on guessing.
		if i%4 == 3 {
			if _, err := e.pool.Exec(context.Background(), "DELETE FROM login_throttle WHERE key LIKE 'ip:%'"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := e.count("login_throttle"); n < 20 {
		t.Fatalf("%d throttle rows, want at least 20", n)
	}
	// Fifteen of the counts are of the past (their window and lock are over).
	if _, err := e.pool.Exec(context.Background(), `UPDATE login_throttle SET window_start = now() - interval '1 hour', locked_until = NULL
		WHERE key IN (SELECT key FROM login_throttle WHERE key LIKE 'email:guess%' ORDER BY key LIMIT 15)`); err != nil {
		t.Fatal(err)
	}
	before := e.count("login_throttle")
	if err := e.sessions.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := e.count("login_throttle"); n != before-15 {
		t.Fatalf("after the sweep %d throttle rows, want %d", n, before-15)
	}
}

// TestLoginIPv6Prefix: the per-IP count of failed sign-ins keys an IPv6 client by its
// /64 (docs/WEB-UI.md, "Sessions"): guesses from many
// addresses of one /64 lock that /64, not another.
func TestLoginIPv6Prefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.maxFailures = 3; o.trustedProxies = []string{"127.0.0.1/32", "::1/128"} })
	e.user("ann@example.com", app.RoleRegular)
	b := e.browser()
	b.get("/login")
	for i := range 3 {
		p := b.post("/login", url.Values{"email": {fmt.Sprintf("other%d@example.com", i)}, "password": {"a wrong password"}},
			"X-Forwarded-For", fmt.Sprintf("2001:db8:1:2::%x", i+1))
		expectStatus(t, p, http.StatusUnauthorized)
	}
	// Another address of the same /64: locked, even with the right password.
	p := b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"correct horse battery"}},
		"X-Forwarded-For", "2001:db8:1:2:ffff:ffff:ffff:fffe")
	expectStatus(t, p, http.StatusTooManyRequests)
	// Another /64 is not.
	p = b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"correct horse battery"}},
		"X-Forwarded-For", "2001:db8:1:3::1")
	expectStatus(t, p, http.StatusSeeOther)
}

// TestLoginRate: POST /login has a request rate per client IP (SHIPFILE_LOGIN_RATE
// with a burst of SHIPFILE_LOGIN_BURST), an IPv6 client counted by its /64: past it,
// 429 with Retry-After before anything else (no password checked, no CSRF check).
func TestLoginRate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) {
		o.maxFailures = 100
		// One sign-in per 100 s after the burst: the 4th below is over the rate however
		// slowly this machine answers the first three.
		o.edge = service.EdgeConfig{LoginRate: 0.01, LoginBurst: 3}
		o.trustedProxies = []string{"127.0.0.1/32", "::1/128"}
	})
	e.user("ann@example.com", app.RoleRegular)
	b := e.browser()
	b.get("/login")
	for i := range 3 {
		p := b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"a wrong password"}},
			"X-Forwarded-For", fmt.Sprintf("2001:db8:7:7::%x", i+1))
		expectStatus(t, p, http.StatusUnauthorized)
	}
	// The 4th within the burst's second, from another address of the /64: 429, and
	// the right password is not even checked.
	p := b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"correct horse battery"}},
		"X-Forwarded-For", "2001:db8:7:7:abcd::1")
	expectStatus(t, p, http.StatusTooManyRequests)
	if s, err := strconv.Atoi(p.header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After = %q, want whole seconds", p.header.Get("Retry-After"))
	}
	if n := e.count("web_sessions"); n != 0 {
		t.Fatalf("a sign-in over the rate opened a session")
	}
	// Another /64, and an IPv4 client, have rates of their own.
	expectStatus(t, b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"correct horse battery"}},
		"X-Forwarded-For", "2001:db8:7:8::1"), http.StatusSeeOther)
	b2 := e.browser()
	b2.get("/login")
	expectStatus(t, b2.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"a wrong password"}},
		"X-Forwarded-For", "198.51.100.7"), http.StatusUnauthorized)
	// The sign-in page itself (GET) is not counted.
	for range 5 {
		expectStatus(t, b2.get("/login"), http.StatusOK)
	}
}
