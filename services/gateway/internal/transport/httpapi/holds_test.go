package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
)

// TestLegalHold: a held package shows on_hold; its owner's and an admin's delete, the
// removal of its file and an expiry in the database are refused (409 "on legal hold");
// a user's hold covers the packages the user creates afterwards; release lets the
// delete through; both are audited, in the chain.
func TestLegalHold(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	owner, token := a.user("owner@example.com", app.RoleRegular)
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	p := a.createPackage(token, map[string]any{"title": "Q3", "recipient_email": "bob@example.com"})
	id := p["id"].(string)
	expect(t, a.upload("/api/v1/packages/"+id+"/files", token, "a.txt", []byte("evidence")), http.StatusCreated)
	files := a.do("GET", "/api/v1/packages/"+id, token, nil).json(t)["files"].([]any)
	fileID := files[0].(map[string]any)["id"].(string)

	expect(t, a.do("POST", "/api/v1/admin/holds", token, map[string]any{"package_id": id, "reason": "case 7"}), http.StatusForbidden)
	expect(t, a.do("POST", "/api/v1/admin/holds", admin, map[string]any{"reason": "case 7"}), http.StatusUnprocessableEntity)
	expect(t, a.do("POST", "/api/v1/admin/holds", admin, map[string]any{"package_id": "0190c0de-0000-7000-8000-000000000001", "reason": "x"}), http.StatusNotFound)
	r := a.do("POST", "/api/v1/admin/holds", admin, map[string]any{"package_id": id, "reason": "case 7"})
	expect(t, r, http.StatusCreated)
	hold := r.json(t)
	if hold["id"] == "" || hold["active"] != true || hold["package_id"] != id || hold["reason"] != "case 7" {
		t.Fatalf("the hold: %v", hold)
	}
	if got := a.do("GET", "/api/v1/packages/"+id, token, nil).json(t)["on_hold"]; got != true {
		t.Fatalf("on_hold = %v, want true", got)
	}
	refused := func(r response, what string) {
		t.Helper()
		if r.status != http.StatusConflict || !strings.Contains(string(r.body), `"on legal hold"`) {
			t.Fatalf("%s: %d %s, want 409 on legal hold", what, r.status, r.body)
		}
	}
	refused(a.do("DELETE", "/api/v1/packages/"+id, token, nil), "the owner's delete")
	refused(a.do("DELETE", "/api/v1/packages/"+id, admin, nil), "an admin's delete")
	refused(a.do("DELETE", "/api/v1/packages/"+id+"/files/"+fileID, token, nil), "the file's removal")
	if _, err := a.pool.Exec(context.Background(), `UPDATE packages SET state = 'expired' WHERE id = $1`, id); err == nil {
		t.Fatal("expiring a held package in the database went through")
	}

	// A user's hold covers a package the user creates while it is active.
	r = a.do("POST", "/api/v1/admin/holds", admin, map[string]any{"user_id": owner.ID, "reason": "custodian"})
	expect(t, r, http.StatusCreated)
	userHold := r.json(t)["id"].(string)
	later := a.createPackage(token, map[string]any{"title": "later", "recipient_email": "bob@example.com"})
	later = a.do("GET", "/api/v1/packages/"+later["id"].(string), token, nil).json(t)
	if later["on_hold"] != true {
		t.Fatalf("a package created under the user's hold: on_hold = %v", later["on_hold"])
	}
	list := a.do("GET", "/api/v1/admin/holds", admin, nil)
	expect(t, list, http.StatusOK)
	if n := len(list.json(t)["items"].([]any)); n != 2 {
		t.Fatalf("%d holds listed, want 2", n)
	}

	expect(t, a.do("POST", "/api/v1/admin/holds/"+hold["id"].(string)+"/release", admin, nil), http.StatusOK)
	expect(t, a.do("POST", "/api/v1/admin/holds/"+hold["id"].(string)+"/release", admin, nil), http.StatusConflict)
	// The user's hold still covers the package.
	refused(a.do("DELETE", "/api/v1/packages/"+id, token, nil), "the delete under the user's hold")
	r = a.do("POST", "/api/v1/admin/holds/"+userHold+"/release", admin, nil)
	expect(t, r, http.StatusOK)
	if rel := r.json(t); rel["active"] != false || rel["released_at"] == nil {
		t.Fatalf("the released hold: %v", rel)
	}
	if got := a.do("GET", "/api/v1/packages/"+id, token, nil).json(t)["on_hold"]; got != false {
		t.Fatalf("on_hold after the releases = %v", got)
	}
	expect(t, a.do("DELETE", "/api/v1/packages/"+id, token, nil), http.StatusNoContent)

	var placed, released int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE action = 'hold.create'), count(*) FILTER (WHERE action = 'hold.release')
		FROM audit_log WHERE seq IS NOT NULL`).Scan(&placed, &released); err != nil || placed != 2 || released != 2 {
		t.Fatalf("%d hold.create and %d hold.release entries in the chain (%v), want 2 and 2", placed, released, err)
	}
}

// TestAuditExport: the export streams the chain as JSONL and CSV that verify offline,
// fails verification when one line changes, bounds its range by time, and is audited.
func TestAuditExport(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	for range 5 {
		a.createPackage(token, map[string]any{"title": "Q3", "recipient_email": "bob@example.com"})
	}
	expect(t, a.do("GET", "/api/v1/admin/audit/export", token, nil), http.StatusForbidden)
	expect(t, a.do("GET", "/api/v1/admin/audit/export?format=xml", admin, nil), http.StatusUnprocessableEntity)
	expect(t, a.do("GET", "/api/v1/admin/audit/export?from=yesterday", admin, nil), http.StatusUnprocessableEntity)

	for _, format := range []string{"jsonl", "csv"} {
		r := a.do("GET", "/api/v1/admin/audit/export?format="+format, admin, nil)
		expect(t, r, http.StatusOK)
		n, b, err := audit.VerifyExport(bytes.NewReader(r.body))
		if err != nil || b != nil || n < 5 {
			t.Fatalf("%s export: %d entries, %v, %v", format, n, b, err)
		}
		forged := bytes.Replace(r.body, []byte("package.create"), []byte("package.delete"), 1)
		if _, b, err := audit.VerifyExport(bytes.NewReader(forged)); err != nil || b == nil || b.Kind != audit.Changed {
			t.Fatalf("%s export with one line changed: %v, %v; want a changed entry", format, b, err)
		}
	}
	r := a.do("GET", "/api/v1/admin/audit/export?from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z", admin, nil)
	expect(t, r, http.StatusOK)
	if len(r.body) != 0 {
		t.Fatalf("an export of a range with no entries: %q", r.body)
	}
	var exports int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'audit.export' AND seq IS NOT NULL`).Scan(&exports); err != nil || exports != 3 {
		t.Fatalf("%d audit.export entries (%v), want 3", exports, err)
	}
}
