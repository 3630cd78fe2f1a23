package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// TestParallelWrongPasswordsAreCountedFirst: attempts are counted before their
// password is checked, so 20 parallel wrong passwords for one address get at most
// SHIPFILE_LOGIN_MAX_FAILURES checks; the rest are 429 with Retry-After.
func TestParallelWrongPasswordsAreCountedFirst(t *testing.T) {
	t.Parallel()
	hasher := app.NewHasher(0, 0)
	e := newEnv(t, func(o *options) { o.maxFailures = 3; o.hasher = hasher })
	e.user("ann@example.com", app.RoleRegular)
	before := hasher.Runs()
	var mu sync.Mutex
	answers := map[int]int{}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			b := e.browser()
			b.get("/login")
			p := b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {fmt.Sprintf("guess number %d", i)}})
			if p.status == http.StatusTooManyRequests && p.header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			mu.Lock()
			answers[p.status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	checked := hasher.Runs() - before
	if checked > 3 || answers[http.StatusUnauthorized] > 3 || answers[http.StatusUnauthorized]+answers[http.StatusTooManyRequests] != 20 {
		t.Fatalf("%d passwords checked, answers %v; want at most 3 checks and 401s, the rest 429", checked, answers)
	}
}

// TestSignInCostsTheSameForEveryAccount: an unknown address, a disabled account and
// an account without a password each cost one argon2id verification, like a wrong
// password for a real account, so timing tells them apart no more than counting.
func TestSignInCostsTheSameForEveryAccount(t *testing.T) {
	t.Parallel()
	hasher := app.NewHasher(0, 0)
	e := newEnv(t, func(o *options) { o.hasher = hasher })
	e.user("ann@example.com", app.RoleRegular)
	disabled := e.user("gone@example.com", app.RoleRegular)
	if _, err := e.pool.Exec(context.Background(), "UPDATE users SET disabled = true WHERE id = $1", disabled.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.identity.CreateUser(context.Background(), app.NewUser{Email: "nopw@example.com", Name: "No password", Role: app.RoleRegular}); err != nil {
		t.Fatal(err)
	}
	for _, email := range []string{"ann@example.com", "nobody@example.com", "gone@example.com", "nopw@example.com"} {
		t.Run(email, func(t *testing.T) {
			b := e.browser()
			b.get("/login")
			before := hasher.Runs()
			p := b.post("/login", url.Values{"email": {email}, "password": {"correct horse battery wrong"}})
			expectStatus(t, p, http.StatusUnauthorized)
			if n := hasher.Runs() - before; n != 1 {
				t.Fatalf("%d argon2id runs, want 1", n)
			}
		})
	}
	// The right password of a disabled account still fails, after one run.
	b := e.browser()
	b.get("/login")
	before := hasher.Runs()
	expectStatus(t, b.post("/login", url.Values{"email": {"gone@example.com"}, "password": {"correct horse battery"}}), http.StatusUnauthorized)
	if n := hasher.Runs() - before; n != 1 {
		t.Fatalf("%d argon2id runs, want 1", n)
	}
}

// TestNextStaysOnSite: after sign-in, next is followed only when it is a path of this
// site.
func TestNextStaysOnSite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ann@example.com", app.RoleRegular)
	cases := map[string]string{
		"/account":              "/account",
		"/packages/x?tab=files": "/packages/x?tab=files",
		"/\t/evil.example":      "/",
		"/\n/evil.example":      "/",
		"//evil.example":        "/",
		"/\\evil.example":       "/",
		"/a//evil.example":      "/",
		"https://evil.example":  "/",
		"javascript:alert(1)":   "/",
		"/\u202e/evil.example":  "/",
		"":                      "/",
	}
	for next, want := range cases {
		t.Run(fmt.Sprintf("%q", next), func(t *testing.T) {
			b := e.browser()
			b.get("/login?next=" + url.QueryEscape(next))
			p := b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"correct horse battery"}, "next": {next}})
			expectRedirect(t, p, want)
		})
	}
	// The query form of the example, as a browser sends it.
	b := e.browser()
	b.login("ann@example.com")
	expectRedirect(t, b.get("/login?next=/%09/evil.example"), "/")
}
