package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// TestActivityPage: an admin's activity page shows each user's packages sent, bytes
// and recipients' domains over the range, links the CSV, refuses a bad date; a regular
// user has no such page.
func TestActivityPage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u, b := e.signedIn("bob@example.com")
	if _, err := e.packages.Create(ctx, u, app.Client{}, packages.NewPackage{Title: ptr("t"), RecipientEmail: ptr("r@partner.example")}); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/admin/reports/activity"); p.status != http.StatusForbidden && p.status != http.StatusNotFound {
		t.Fatalf("a regular user's activity page: %d", p.status)
	}
	e.user("admin@example.com", app.RoleAdmin)
	ab := e.browser()
	ab.login("admin@example.com")
	page := ab.get("/admin/reports/activity")
	expectStatus(t, page, http.StatusOK)
	for _, want := range []string{`id="activity"`, "bob@example.com", "partner.example", "/api/v1/admin/reports/activity?format=csv"} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("activity page lacks %q:\n%.4000s", want, page.body)
		}
	}
	if bad := ab.get("/admin/reports/activity?from=yesterday"); bad.status != http.StatusUnprocessableEntity || !strings.Contains(bad.body, "Must be a date") {
		t.Fatalf("a bad date: %d:\n%.2000s", bad.status, bad.body)
	}
	if audit := ab.get("/admin/audit"); !strings.Contains(audit.body, `href="/admin/reports/activity"`) {
		t.Fatalf("the audit page does not link the activity report:\n%.2000s", audit.body)
	}
}
