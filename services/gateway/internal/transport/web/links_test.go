package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// TestProtectedRecipientPage: a protected link's page shows only a password form; a
// wrong password shows it again (401), the right one sets the shipfile_link cookie
// for the link's paths and redirects to the page; five wrong ones make the form
// answer 429 with Retry-After; the form needs its CSRF token.
func TestProtectedRecipientPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("ann@example.com", app.RoleRegular)
	_, token := e.sent(owner, packages.NewPackage{Title: ptr("Secret stuff"), RecipientEmail: ptr("bob@example.com"),
		Direction: ptr("inbound"), Note: ptr("the note"), Password: ptr("let me in please")})
	b := e.browser()
	form := b.get("/p/" + token)
	expectStatus(t, form, http.StatusOK)
	if strings.Contains(form.body, "Secret stuff") || strings.Contains(form.body, "the note") || !strings.Contains(form.body, `id="unlock-form"`) {
		t.Fatalf("the password page shows more than the form:\n%s", form.body)
	}
	expectStatus(t, b.post("/p/"+token, url.Values{"password": {"let me in please"}, "_csrf": {"forged"}}), http.StatusForbidden)
	wrong := b.post("/p/"+token, url.Values{"password": {"let me in"}})
	expectStatus(t, wrong, http.StatusUnauthorized)
	if !strings.Contains(wrong.body, "Wrong password.") || strings.Contains(wrong.body, "Secret stuff") {
		t.Fatalf("wrong password page:\n%s", wrong.body)
	}
	ok := b.post("/p/"+token, url.Values{"password": {"let me in please"}})
	expectRedirect(t, ok, "/p/"+token)
	cookies := ok.header.Values("Set-Cookie")
	if len(cookies) != 2 || !strings.Contains(cookies[0], "shipfile_link=") || !strings.Contains(cookies[0], "HttpOnly") ||
		!strings.Contains(cookies[0], "SameSite=Lax") || !strings.Contains(cookies[0], "Path=/p/"+token) ||
		!strings.Contains(cookies[1], "Path=/api/v1/links/"+token) {
		t.Fatalf("cookies %q", cookies)
	}
	page := b.get("/p/" + token)
	expectStatus(t, page, http.StatusOK)
	if !strings.Contains(page.body, "Secret stuff") || !strings.Contains(page.body, "the note") {
		t.Fatalf("the unlocked page:\n%s", page.body)
	}

	// Another browser: four more wrong passwords make five for the link, then 429
	// whatever the password.
	c := e.browser()
	c.get("/p/" + token)
	for range 4 {
		expectStatus(t, c.post("/p/"+token, url.Values{"password": {"guess guess"}}), http.StatusUnauthorized)
	}
	locked := c.post("/p/"+token, url.Values{"password": {"let me in please"}})
	expectStatus(t, locked, http.StatusTooManyRequests)
	if s, err := strconv.Atoi(locked.header.Get("Retry-After")); err != nil || s <= 0 || time.Duration(s)*time.Second > links.UnlockWindow {
		t.Fatalf("Retry-After %q", locked.header.Get("Retry-After"))
	}
	if !strings.Contains(locked.body, "Too many wrong passwords") {
		t.Fatalf("throttled page:\n%s", locked.body)
	}
}

// TestEditForm: the package page's edit form changes the package; bad input comes back
// beside the field and changes nothing.
func TestEditForm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("ann@example.com", app.RoleRegular)
	ctx := context.Background()
	p, err := e.packages.Create(ctx, owner, app.Client{}, packages.NewPackage{Title: ptr("Old"), RecipientEmail: ptr("bob@example.com")})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login("ann@example.com")
	page := b.get("/packages/" + p.ID.String())
	expectStatus(t, page, http.StatusOK)
	if !strings.Contains(page.body, `id="edit-form"`) {
		t.Fatal("no edit form on a draft's page")
	}
	bad := b.post("/packages/"+p.ID.String()+"/edit", url.Values{"title": {"New"}, "max_downloads": {"0"}, "notify_owner": {"1"}})
	expectStatus(t, bad, http.StatusUnprocessableEntity)
	if !strings.Contains(bad.body, "Must be between 1 and 10000") {
		t.Fatalf("no field error:\n%s", bad.body)
	}
	if got, _, _ := e.packages.Get(ctx, owner, p.ID); got.Title != "Old" {
		t.Fatal("a bad form changed the package")
	}
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Minute)
	saved := b.post("/packages/"+p.ID.String()+"/edit", url.Values{"title": {"New"}, "note": {"n"}, "max_downloads": {"3"},
		"password": {"a new password"}, "expires_at": {until.Format("2006-01-02T15:04")}})
	expectRedirect(t, saved, "/packages/"+p.ID.String()+"?msg=saved")
	got, _, err := e.packages.Get(ctx, owner, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != "New" || got.Note != "n" || got.MaxDownloads == nil || *got.MaxDownloads != 3 || !got.PasswordProtected() ||
		got.NotifyOwner || !got.ExpiresAt.Equal(until) {
		t.Fatalf("after the edit: %+v", got)
	}
	page = b.get("/packages/" + p.ID.String())
	if !strings.Contains(page.body, "password protected") || !strings.Contains(page.body, "3 per file") {
		t.Fatalf("the page does not show the protection:\n%s", page.body)
	}
	// Removing the password and the limit.
	expectRedirect(t, b.post("/packages/"+p.ID.String()+"/edit", url.Values{"title": {"New"}, "remove_password": {"1"}, "notify_owner": {"1"}}),
		"/packages/"+p.ID.String()+"?msg=saved")
	if got, _, _ := e.packages.Get(ctx, owner, p.ID); got.PasswordProtected() || got.MaxDownloads != nil || !got.NotifyOwner {
		t.Fatalf("after removing: %+v", got)
	}
}
