package httpapi_test

import (
	"context"
	"encoding/csv"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// TestActivityReport: per user, the packages sent and their bytes, the bytes received,
// the downloads of their packages and their recipients' domains, in JSON and CSV; a
// bad range is refused.
func TestActivityReport(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, alice := a.user("alice@example.com", app.RoleRegular)
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	p := a.createPackage(alice, map[string]any{"title": "Q3", "recipient_email": "bob@Partner.example"})
	id := p["id"].(string)
	expect(t, a.upload("/api/v1/packages/"+id+"/files", alice, "a.txt", []byte("12345")), http.StatusCreated)
	a.createPackage(alice, map[string]any{"title": "Q4", "recipient_email": "carol@other.example"})
	if _, err := a.pool.Exec(context.Background(), `INSERT INTO audit_log (actor, action, package_id) VALUES ('link', 'file.download', $1), ('link', 'archive.download', $1)`, uuid.MustParse(id)); err != nil {
		t.Fatal(err)
	}

	expect(t, a.do("GET", "/api/v1/admin/reports/activity", alice, nil), http.StatusForbidden)
	expect(t, a.do("GET", "/api/v1/admin/reports/activity?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z", admin, nil), http.StatusUnprocessableEntity)
	r := a.do("GET", "/api/v1/admin/reports/activity", admin, nil)
	expect(t, r, http.StatusOK)
	items := r.json(t)["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("%d users in the report, want alice alone: %s", len(items), r.body)
	}
	got := items[0].(map[string]any)
	if got["email"] != "alice@example.com" || got["packages_sent"] != float64(2) || got["bytes_sent"] != float64(5) ||
		got["bytes_received"] != float64(0) || got["downloads"] != float64(2) ||
		strings.Join(toStrings(got["recipient_domains"].([]any)), ",") != "other.example,partner.example" {
		t.Fatalf("alice's line: %v", got)
	}
	r = a.do("GET", "/api/v1/admin/reports/activity?format=csv", admin, nil)
	expect(t, r, http.StatusOK)
	rows, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil || len(rows) != 2 || rows[1][1] != "alice@example.com" || rows[1][7] != "other.example partner.example" {
		t.Fatalf("CSV: %q, %v", rows, err)
	}
}

func toStrings(vs []any) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i], _ = v.(string)
	}
	return out
}
