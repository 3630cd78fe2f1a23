package browser

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestPolicyPagesInChromium: the packages page's usage bar and the admins' policies
// page, as a browser shows them (screenshots: usage-bar, policies; docs/POLICIES.md).
func TestPolicyPagesInChromium(t *testing.T) {
	sys := startSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bctx := newBrowser(t, ctx)
	admin := newTab(t, bctx, sys.base)
	const password = "a long admin password"
	admin.setup("admin@example.com", "Ada Admin", password)
	admin.open("/login")
	admin.do(chromedp.SendKeys(css("#email"), "admin@example.com"), chromedp.SendKeys(css("#password"), password))
	admin.submit(chromedp.Click(css("form button[type=submit]")))
	admin.open("/account")
	admin.do(chromedp.SendKeys(css("#token-name"), "ci"))
	if st := admin.submit(chromedp.Click(css("#token-form button[type=submit]"))); st != http.StatusCreated {
		t.Fatalf("create token: %d", st)
	}
	api := servicetest.Client{T: t, Base: sys.base, Token: admin.value("#token-value")}
	api.Must("PUT", "/api/v1/admin/policies/default", map[string]any{"storage_quota_bytes": 10 << 20, "max_ttl_days": 30}, http.StatusOK)
	api.Must("POST", "/api/v1/admin/groups", map[string]any{"name": "contractors",
		"policy":      map[string]any{"storage_quota_bytes": 2 << 30, "max_ttl_days": 7, "require_password": true, "allowed_recipient_domains": []string{"partner.example"}},
		"oidc_groups": []string{"contractors"}}, http.StatusCreated)
	p := api.Must("POST", "/api/v1/packages", map[string]any{"title": "Q3 report", "recipient_email": "bob@example.com"}, http.StatusCreated)
	api.Upload("/api/v1/packages/"+p["id"].(string)+"/files", "report.pdf", bytes.Repeat([]byte("q"), 9<<20+300<<10))

	admin.open("/")
	admin.do(chromedp.WaitVisible(css("#usage-bar")))
	if got := admin.text("#usage"); !strings.Contains(got, "of 10 MiB used (92 %)") {
		t.Fatalf("usage bar says %q", got)
	}
	admin.shot("usage-bar")
	admin.open("/admin/policies")
	if got := admin.text("#groups"); !strings.Contains(got, "contractors") || !strings.Contains(got, "password required") {
		t.Fatalf("groups section says %q", got)
	}
	admin.shot("policies")
}
