package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// The mailer writes audit entries with a detail (the recipient, an SMTP rejection);
// the admin audit list shows it, and "" for entries without one.
func TestAuditListShowsDetail(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	p := a.createPackage(token, map[string]any{"title": "Q3", "recipient_email": "bob@example.com"})
	id := p["id"].(string)
	for _, e := range []struct{ action, detail string }{
		{"mail.sent", "to bob@example.com"},
		{"mail.failed", "to bob@example.com: 550 5.1.1 mailbox unavailable"},
	} {
		if _, err := a.pool.Exec(context.Background(),
			`INSERT INTO audit_log (actor, action, package_id, detail) VALUES ('system', $1, $2, $3)`,
			e.action, uuid.MustParse(id), e.detail); err != nil {
			t.Fatal(err)
		}
	}

	r := a.do("GET", "/api/v1/admin/audit?package_id="+id, admin, nil)
	expect(t, r, http.StatusOK)
	got := map[string]any{}
	for _, it := range r.json(t)["items"].([]any) {
		e := it.(map[string]any)
		got[e["action"].(string)] = e["detail"]
		if e["action"] == "mail.sent" && e["actor"] != "system" {
			t.Errorf("mail.sent actor = %v, want system", e["actor"])
		}
	}
	for action, want := range map[string]any{
		"package.create": "",
		"mail.sent":      "to bob@example.com",
		"mail.failed":    "to bob@example.com: 550 5.1.1 mailbox unavailable",
	} {
		if got[action] != want {
			t.Errorf("%s detail = %#v, want %#v", action, got[action], want)
		}
	}
}
