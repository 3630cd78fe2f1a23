package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// TestPolicyPages: the packages page shows the usage bar, the send and request forms
// offer only what the policy allows and say why, and admins see the policies page.
func TestPolicyPages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `UPDATE default_policy SET policy = '{"storage_quota_bytes": 1000, "max_ttl_days": 5, "require_password": true, "max_downloads_ceiling": 3, "allowed_recipient_domains": ["partner.example"], "may_request_files": false}'`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO policy_groups (name, policy, oidc_groups) VALUES ('contractors', '{"max_file_size": 2048}', '{ext}')`); err != nil {
		t.Fatal(err)
	}
	u, b := e.signedIn("bob@example.com")
	if _, err := e.packages.Create(ctx, u, app.Client{}, packages.NewPackage{Title: ptr("t"), RecipientEmail: ptr("r@partner.example"),
		TTLDays: ptr(3), Password: ptr("long enough"), MaxDownloads: ptr(2)}); err != nil {
		t.Fatal(err)
	}

	home := b.get("/")
	expectStatus(t, home, http.StatusOK)
	for _, want := range []string{`id="usage-bar" max="100" value="`, "of 1,000 B used", "1 package in draft or active"} {
		if !strings.Contains(home.body, want) {
			t.Fatalf("packages page lacks %q:\n%.3000s", want, home.body)
		}
	}
	send := b.get("/send")
	expectStatus(t, send, http.StatusOK)
	for _, want := range []string{`max="5"`, "required by your policy", `max="3" required`, "recipients only at partner.example", "links work for at most 5 days"} {
		if !strings.Contains(send.body, want) {
			t.Fatalf("send form lacks %q:\n%.4000s", want, send.body)
		}
	}
	req := b.get("/request")
	if !strings.Contains(req.body, `id="policy-no-requests"`) || strings.Contains(req.body, `id="package-form"`) {
		t.Fatalf("request form under a policy without requests:\n%.3000s", req.body)
	}
	// The form's refusal says which rule.
	refused := b.post("/send", url.Values{"recipient_email": {"r@elsewhere.example"}, "title": {"t"}, "ttl_days": {"3"},
		"password": {"long enough"}, "max_downloads": {"2"}})
	if refused.status != http.StatusUnprocessableEntity || !strings.Contains(strings.ToLower(refused.body), "allowed_recipient_domains: elsewhere.example") {
		t.Fatalf("send to another domain: %d:\n%.3000s", refused.status, refused.body)
	}

	// Regular users have no policies page; admins do.
	if p := b.get("/admin/policies"); p.status != http.StatusForbidden && p.status != http.StatusNotFound {
		t.Fatalf("a regular user's /admin/policies: %d", p.status)
	}
	e.user("admin@example.com", app.RoleAdmin)
	ab := e.browser()
	ab.login("admin@example.com")
	if users := ab.get("/admin/users"); !strings.Contains(users.body, `href="/admin/policies"`) {
		t.Fatal("the users page does not link to the policies page")
	}
	page := ab.get("/admin/policies")
	expectStatus(t, page, http.StatusOK)
	for _, want := range []string{"storage quota 1,000 B", "links up to 5 days", "contractors", "files up to 2 KiB", "bob@example.com", "/api/v1/admin/usage?format=csv"} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("policies page lacks %q:\n%.4000s", want, page.body)
		}
	}
}
