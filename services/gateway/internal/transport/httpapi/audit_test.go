package httpapi_test

import (
	"context"
	"fmt"
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

// TestDeadLinkHitsCountedPerIPAndHour: hits of unknown, malformed and dead links are
// counted in one audit row per IP and hour (docs/API.md, "Hostile clients"), not one row each;
// the admin audit list shows the count.
func TestDeadLinkHitsCountedPerIPAndHour(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	id, link := a.sharedPackage(token, nil, "a.txt")
	expect(t, a.do("POST", "/api/v1/packages/"+id+"/revoke", token, nil), http.StatusOK)
	for i := range 25 {
		expect(t, a.do("GET", fmt.Sprintf("/api/v1/links/%043d", i), "", nil), http.StatusGone)
	}
	expect(t, a.do("GET", "/api/v1/links/short", "", nil), http.StatusGone)
	expect(t, a.do("GET", "/api/v1/links/"+link, "", nil), http.StatusGone)
	expect(t, a.do("GET", "/api/v1/links/"+link+"/archive", "", nil), http.StatusGone)
	var rows, hits int
	if err := a.pool.QueryRow(context.Background(),
		`SELECT count(*), coalesce(sum(hits), 0) FROM audit_log WHERE action = 'link.invalid'`).Scan(&rows, &hits); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || hits != 28 {
		t.Fatalf("28 hits of dead links: %d audit rows counting %d, want 1 counting 28", rows, hits)
	}
	r := a.do("GET", "/api/v1/admin/audit?limit=100", admin, nil)
	expect(t, r, http.StatusOK)
	found := false
	for _, it := range r.json(t)["items"].([]any) {
		e := it.(map[string]any)
		if e["action"] == "link.invalid" {
			found = e["hits"] == float64(28) && e["ip"] != ""
		} else if e["hits"] != float64(1) {
			t.Errorf("%v: hits = %v, want 1", e["action"], e["hits"])
		}
	}
	if !found {
		t.Fatalf("the admin audit list has no link.invalid entry with hits 28: %s", r.body)
	}
}

// TestDeadLinkHitsIPv6ByPrefix: an IPv6 client's hits of dead links are counted in
// the one row of its /64 (as the link rate counts it), whichever address of the /64
// each comes from, so rotating addresses does not write a row per hit; another /64
// and an IPv4 client have rows of their own.
func TestDeadLinkHitsIPv6ByPrefix(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.TrustedProxies = []string{"127.0.0.1/32", "::1/128"}
	a := newTestAPI(t, cfg)
	for i := range 12 {
		r := a.do("GET", fmt.Sprintf("/api/v1/links/%043d", i), "", nil, "X-Forwarded-For", fmt.Sprintf("2001:db8:1:2:%x::%x", i, i+1))
		expect(t, r, http.StatusGone)
	}
	expect(t, a.do("GET", "/api/v1/links/unknown", "", nil, "X-Forwarded-For", "2001:db8:1:3::1"), http.StatusGone)
	expect(t, a.do("GET", "/api/v1/links/unknown", "", nil, "X-Forwarded-For", "198.51.100.7"), http.StatusGone)
	rows, err := a.pool.Query(context.Background(), `SELECT ip, hits FROM audit_log WHERE action = 'link.invalid' ORDER BY ip`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var ip string
		var hits int
		if err := rows.Scan(&ip, &hits); err != nil {
			t.Fatal(err)
		}
		got[ip] = hits
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"2001:db8:1:2::/64": 12, "2001:db8:1:3::/64": 1, "198.51.100.7": 1}
	if len(got) != len(want) {
		t.Fatalf("link.invalid rows %v, want %v", got, want)
	}
	for ip, n := range want {
		if got[ip] != n {
			t.Fatalf("link.invalid rows %v, want %v", got, want)
		}
	}
}
