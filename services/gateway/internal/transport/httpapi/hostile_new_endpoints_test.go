package httpapi_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
)

// Hostile input on the policy, audit, language, preview and webhook-ordering routes:
// every refusal is a 4xx with exactly {"detail": "..."} as application/json (expect),
// the answers that succeed match proto/openapi.yaml (a.do's contract check), and a
// refused request leaves nothing written.

// hostileCase is one request and the status it must get.
type hostileCase struct {
	name    string
	method  string
	path    string
	body    any // nil, a raw string (sent as JSON), or a value encoded as JSON
	headers []string
	want    int
}

// run sends each case and checks its answer.
func (a *testAPI) run(t *testing.T, token string, cases []hostileCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expect(t, a.do(c.method, c.path, token, c.body, c.headers...), c.want)
		})
	}
}

// count runs a counting query.
func (a *testAPI) count(query string, args ...any) int {
	a.t.Helper()
	var n int
	if err := a.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		a.t.Fatal(err)
	}
	return n
}

// oversized is a JSON object past the test gateways' 1 MiB body limit.
var oversized = `{"reason": "` + strings.Repeat("x", 2<<20) + `"}`

func TestHostilePolicyRoutes(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	bob, bobToken := a.user("bob@example.com", app.RoleRegular)
	a.setDefaultPolicy(admin, map[string]any{"max_ttl_days": 30, "allowed_recipient_domains": []string{"example.com"}})
	r := a.do("POST", "/api/v1/admin/groups", admin, map[string]any{"name": "staff", "policy": map[string]any{"storage_quota_bytes": 1000}})
	expect(t, r, http.StatusCreated)
	gid := strconv.FormatInt(int64(r.json(t)["id"].(float64)), 10)
	group := "/api/v1/admin/groups/" + gid
	bobID := strconv.FormatInt(bob.ID, 10)

	const def = "/api/v1/admin/policies/default"
	put := func(name string, body any, want int, headers ...string) hostileCase {
		return hostileCase{"default policy: " + name, "PUT", def, body, headers, want}
	}
	create := func(name string, body any) hostileCase {
		return hostileCase{"create group: " + name, "POST", "/api/v1/admin/groups", body, nil, http.StatusUnprocessableEntity}
	}
	cases := []hostileCase{
		put("malformed JSON", `{"max_ttl_days": `, http.StatusUnprocessableEntity),
		put("empty body", "", http.StatusUnprocessableEntity),
		put("an array", `[]`, http.StatusUnprocessableEntity),
		put("null", `null`, http.StatusUnprocessableEntity),
		put("a string", `"open"`, http.StatusUnprocessableEntity),
		put("two objects", `{} {}`, http.StatusUnprocessableEntity),
		put("quota a string", map[string]any{"storage_quota_bytes": "10"}, http.StatusUnprocessableEntity),
		put("quota fractional", map[string]any{"storage_quota_bytes": 1.5}, http.StatusUnprocessableEntity),
		put("quota past int64", `{"storage_quota_bytes": 1e30}`, http.StatusUnprocessableEntity),
		put("quota negative", map[string]any{"storage_quota_bytes": -1}, http.StatusUnprocessableEntity),
		put("max_file_size negative", map[string]any{"max_file_size": -5}, http.StatusUnprocessableEntity),
		put("max_ttl_days 0", map[string]any{"max_ttl_days": 0}, http.StatusUnprocessableEntity),
		put("max_ttl_days 91", map[string]any{"max_ttl_days": 91}, http.StatusUnprocessableEntity),
		put("max_ttl_days past int", `{"max_ttl_days": 99999999999999999999}`, http.StatusUnprocessableEntity),
		put("max_active_packages negative", map[string]any{"max_active_packages": -1}, http.StatusUnprocessableEntity),
		put("max_downloads_ceiling 0", map[string]any{"max_downloads_ceiling": 0}, http.StatusUnprocessableEntity),
		put("require_password a string", map[string]any{"require_password": "yes"}, http.StatusUnprocessableEntity),
		put("may_request_files a number", map[string]any{"may_request_files": 1}, http.StatusUnprocessableEntity),
		put("domains a string", map[string]any{"allowed_recipient_domains": "example.com"}, http.StatusUnprocessableEntity),
		put("domains of numbers", map[string]any{"allowed_recipient_domains": []int{1}}, http.StatusUnprocessableEntity),
		put("domain an address", map[string]any{"allowed_recipient_domains": []string{"a@example.com"}}, http.StatusUnprocessableEntity),
		put("domain empty", map[string]any{"allowed_recipient_domains": []string{""}}, http.StatusUnprocessableEntity),
		put("domain with a NUL", map[string]any{"allowed_recipient_domains": []string{"exa\x00mple.com"}}, http.StatusUnprocessableEntity),
		put("domain with a newline", map[string]any{"allowed_recipient_domains": []string{"example.com\nevil.com"}}, http.StatusUnprocessableEntity),
		put("domain with a bidi override", map[string]any{"allowed_recipient_domains": []string{"example\u202Emoc.com"}}, http.StatusUnprocessableEntity),
		put("domain too long", map[string]any{"allowed_recipient_domains": []string{strings.Repeat("a", 254)}}, http.StatusUnprocessableEntity),
		put("unknown field", map[string]any{"max_tll_days": 3}, http.StatusUnprocessableEntity),
		put("another media type", `{}`, http.StatusUnsupportedMediaType, "Content-Type", "text/plain"),
		put("a body past the limit", `{"allowed_recipient_domains": ["`+strings.Repeat("a", 2<<20)+`"]}`, http.StatusRequestEntityTooLarge),

		create("name missing", map[string]any{"policy": map[string]any{}}),
		create("name empty", map[string]any{"name": ""}),
		create("name blank", map[string]any{"name": "   "}),
		create("name too long", map[string]any{"name": strings.Repeat("n", 101)}),
		create("name a number", map[string]any{"name": 5}),
		create("name with a NUL", map[string]any{"name": "a\x00b"}),
		create("name with a control", map[string]any{"name": "a\x1bb"}),
		create("name with a bidi override", map[string]any{"name": "staff\u202Etxt"}),
		create("policy a string", map[string]any{"name": "x", "policy": "strict"}),
		create("policy an array", map[string]any{"name": "x", "policy": []any{}}),
		create("policy with an unknown field", map[string]any{"name": "x", "policy": map[string]any{"quota": 1}}),
		create("policy with a wrong type", map[string]any{"name": "x", "policy": map[string]any{"max_ttl_days": "7"}}),
		create("oidc_groups a string", map[string]any{"name": "x", "oidc_groups": "ext"}),
		create("oidc_groups of numbers", map[string]any{"name": "x", "oidc_groups": []int{1}}),
		create("oidc_groups with an empty name", map[string]any{"name": "x", "oidc_groups": []string{""}}),
		create("oidc_groups with a NUL", map[string]any{"name": "x", "oidc_groups": []string{"ext\x00"}}),
		create("oidc_groups with a name too long", map[string]any{"name": "x", "oidc_groups": []string{strings.Repeat("g", 201)}}),
		create("malformed JSON", `{"name": `),
		{"create group: another media type", "POST", "/api/v1/admin/groups", `{"name": "x"}`, []string{"Content-Type", "application/xml"}, http.StatusUnsupportedMediaType},
		{"create group: a duplicate name in another case", "POST", "/api/v1/admin/groups", map[string]any{"name": "STAFF"}, nil, http.StatusConflict},

		{"group id not a number", "GET", "/api/v1/admin/groups/abc", nil, nil, http.StatusNotFound},
		{"group id 0", "GET", "/api/v1/admin/groups/0", nil, nil, http.StatusNotFound},
		{"group id negative", "GET", "/api/v1/admin/groups/-1", nil, nil, http.StatusNotFound},
		{"group id past int64", "GET", "/api/v1/admin/groups/99999999999999999999", nil, nil, http.StatusNotFound},
		{"group unknown", "GET", "/api/v1/admin/groups/987654", nil, nil, http.StatusNotFound},
		{"change an unknown group", "PATCH", "/api/v1/admin/groups/987654", map[string]any{"name": "x"}, nil, http.StatusNotFound},
		{"change a group: bad policy", "PATCH", group, map[string]any{"policy": map[string]any{"max_ttl_days": 0}}, nil, http.StatusUnprocessableEntity},
		{"change a group: name with a NUL", "PATCH", group, map[string]any{"name": "a\x00"}, nil, http.StatusUnprocessableEntity},
		{"change a group: malformed JSON", "PATCH", group, `{`, nil, http.StatusUnprocessableEntity},
		{"delete an unknown group", "DELETE", "/api/v1/admin/groups/987654", nil, nil, http.StatusNotFound},
		{"member of an unknown group", "PUT", "/api/v1/admin/groups/987654/members/" + bobID, nil, nil, http.StatusNotFound},
		{"member id not a number", "PUT", group + "/members/bob", nil, nil, http.StatusNotFound},
		{"member unknown", "PUT", group + "/members/987654", nil, nil, http.StatusNotFound},
		{"member past int64", "PUT", group + "/members/99999999999999999999", nil, nil, http.StatusNotFound},
		{"end a membership that is none", "DELETE", group + "/members/" + bobID, nil, nil, http.StatusNotFound},

		{"usage sort unknown", "GET", "/api/v1/admin/usage?sort=size", nil, nil, http.StatusUnprocessableEntity},
		{"usage format in capitals", "GET", "/api/v1/admin/usage?format=CSV", nil, nil, http.StatusUnprocessableEntity},
		{"usage format unknown", "GET", "/api/v1/admin/usage?format=xml", nil, nil, http.StatusUnprocessableEntity},
	}
	a.run(t, admin, cases)

	// Regular users get 403 on every admin route, whatever the input.
	a.run(t, bobToken, []hostileCase{
		{"regular: default policy", "PUT", def, `{`, nil, http.StatusForbidden},
		{"regular: groups", "POST", "/api/v1/admin/groups", map[string]any{"name": "mine"}, nil, http.StatusForbidden},
		{"regular: membership", "PUT", group + "/members/" + bobID, nil, nil, http.StatusForbidden},
	})

	// Nothing refused was written: the default policy and the one group are as they were.
	got := a.do("GET", def, admin, nil)
	expect(t, got, http.StatusOK)
	pol := got.json(t)
	if pol["max_ttl_days"] != float64(30) || pol["storage_quota_bytes"] != nil {
		t.Fatalf("default policy after refused changes: %v", pol)
	}
	if ds, _ := pol["allowed_recipient_domains"].([]any); len(ds) != 1 || ds[0] != "example.com" {
		t.Fatalf("allowed_recipient_domains after refused changes: %v", pol["allowed_recipient_domains"])
	}
	if n := a.rowCount("policy_groups"); n != 1 {
		t.Fatalf("%d groups after refused creations, want 1", n)
	}
	g := a.do("GET", group, admin, nil)
	expect(t, g, http.StatusOK)
	if gm := g.json(t); gm["name"] != "staff" || gm["policy"].(map[string]any)["storage_quota_bytes"] != float64(1000) {
		t.Fatalf("group after refused changes: %v", gm)
	}
	// The caller's usage answers as documented (the contract check of a.do).
	if u := a.usage(bobToken); u["quota_bytes"] != nil || u["policy"].(map[string]any)["max_ttl_days"] != float64(30) {
		t.Fatalf("usage: %v", u)
	}
}

func TestHostileAuditRoutes(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	owner, token := a.user("owner@example.com", app.RoleRegular)
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	id := a.createPackage(token, map[string]any{"title": "Q3", "recipient_email": "bob@example.com"})["id"].(string)
	exportsBefore := a.count(`SELECT count(*) FROM audit_log WHERE action = 'audit.export'`)

	const export = "/api/v1/admin/audit/export"
	const report = "/api/v1/admin/reports/activity"
	bad := func(name, path string) hostileCase {
		return hostileCase{name, "GET", path, nil, nil, http.StatusUnprocessableEntity}
	}
	var cases []hostileCase
	for _, route := range []string{export, report} {
		cases = append(cases,
			bad(route+": from a word", route+"?from=yesterday"),
			bad(route+": to a word", route+"?to=later"),
			bad(route+": a date without time", route+"?from=2024-01-01"),
			bad(route+": month 13", route+"?from=2024-13-01T00:00:00Z"),
			bad(route+": no zone", route+"?from=2024-01-01T00:00:00"),
			bad(route+": offset out of range", route+"?from=2024-01-01T00:00:00%2B25:00"),
			bad(route+": a number", route+"?from=1700000000"),
			bad(route+": from after to", route+"?from=2024-02-01T00:00:00Z&to=2024-01-01T00:00:00Z"),
			bad(route+": from equal to", route+"?from=2024-01-01T00:00:00Z&to=2024-01-01T00:00:00Z"),
			bad(route+": format in capitals", route+"?format=CSV"),
			bad(route+": format unknown", route+"?format=xml"),
			bad(route+": format empty", route+"?format="),
		)
	}
	cases = append(cases,
		bad(report+": a range past 366 days", report+"?from=2020-01-01T00:00:00Z&to=2024-01-01T00:00:00Z"),
		bad(report+": from alone, long ago", report+"?from=2000-01-01T00:00:00Z"),
		bad(export+": format jsonl in capitals", export+"?format=JSONL"),
		bad("audit list: limit 0", "/api/v1/admin/audit?limit=0"),
		bad("audit list: limit 101", "/api/v1/admin/audit?limit=101"),
		bad("audit list: limit a word", "/api/v1/admin/audit?limit=ten"),
		bad("audit list: a forged cursor", "/api/v1/admin/audit?cursor=forged"),
		bad("audit list: package_id not a UUID", "/api/v1/admin/audit?package_id=abc"),
	)

	const holds = "/api/v1/admin/holds"
	hold := func(name string, body any, want int, headers ...string) hostileCase {
		return hostileCase{"hold: " + name, "POST", holds, body, headers, want}
	}
	cases = append(cases,
		hold("both ids", map[string]any{"package_id": id, "user_id": owner.ID, "reason": "x"}, http.StatusUnprocessableEntity),
		hold("neither id", map[string]any{"reason": "x"}, http.StatusUnprocessableEntity),
		hold("both null", map[string]any{"package_id": nil, "user_id": nil, "reason": "x"}, http.StatusUnprocessableEntity),
		hold("an unknown package", map[string]any{"package_id": "0190c0de-0000-7000-8000-000000000001", "reason": "x"}, http.StatusNotFound),
		hold("an unknown user", map[string]any{"user_id": 987654, "reason": "x"}, http.StatusNotFound),
		hold("user 0", map[string]any{"user_id": 0, "reason": "x"}, http.StatusNotFound),
		hold("a negative user", map[string]any{"user_id": -3, "reason": "x"}, http.StatusNotFound),
		hold("package_id not a UUID", map[string]any{"package_id": "abc", "reason": "x"}, http.StatusUnprocessableEntity),
		hold("package_id a number", map[string]any{"package_id": 5, "reason": "x"}, http.StatusUnprocessableEntity),
		hold("user_id a string", map[string]any{"user_id": "7", "reason": "x"}, http.StatusUnprocessableEntity),
		hold("user_id fractional", map[string]any{"user_id": 1.5, "reason": "x"}, http.StatusUnprocessableEntity),
		hold("user_id past int64", `{"user_id": 1e30, "reason": "x"}`, http.StatusUnprocessableEntity),
		hold("reason missing", map[string]any{"package_id": id}, http.StatusUnprocessableEntity),
		hold("reason empty", map[string]any{"package_id": id, "reason": ""}, http.StatusUnprocessableEntity),
		hold("reason blank", map[string]any{"package_id": id, "reason": "  \n "}, http.StatusUnprocessableEntity),
		hold("reason a number", map[string]any{"package_id": id, "reason": 7}, http.StatusUnprocessableEntity),
		hold("reason too long", map[string]any{"package_id": id, "reason": strings.Repeat("r", audit.MaxReasonLen+1)}, http.StatusUnprocessableEntity),
		hold("reason with a NUL", map[string]any{"package_id": id, "reason": "case\x007"}, http.StatusUnprocessableEntity),
		hold("reason with an escape", map[string]any{"package_id": id, "reason": "case \x1b[31m7"}, http.StatusUnprocessableEntity),
		hold("reason with a bidi override", map[string]any{"package_id": id, "reason": "case \u202E7"}, http.StatusUnprocessableEntity),
		hold("a body past the limit", oversized, http.StatusRequestEntityTooLarge),
		hold("malformed JSON", `{"package_id": `, http.StatusUnprocessableEntity),
		hold("empty body", "", http.StatusUnprocessableEntity),
		hold("an array", `[]`, http.StatusUnprocessableEntity),
		hold("null", `null`, http.StatusUnprocessableEntity),
		hold("another media type", `{}`, http.StatusUnsupportedMediaType, "Content-Type", "text/plain"),
		hostileCase{"release: id not a UUID", "POST", holds + "/abc/release", nil, nil, http.StatusNotFound},
		hostileCase{"release: an unknown hold", "POST", holds + "/0190c0de-0000-7000-8000-000000000002/release", nil, nil, http.StatusNotFound},
	)
	a.run(t, admin, cases)
	a.run(t, token, []hostileCase{
		{"regular: export", "GET", export + "?from=nope", nil, nil, http.StatusForbidden},
		{"regular: hold", "POST", holds, `{`, nil, http.StatusForbidden},
		{"regular: report", "GET", report + "?format=xml", nil, nil, http.StatusForbidden},
	})

	// Nothing refused was written: no hold, no hold or export entry in the audit log.
	if n := a.rowCount("legal_holds"); n != 0 {
		t.Fatalf("%d holds after refused requests", n)
	}
	if n := a.count(`SELECT count(*) FROM audit_log WHERE action LIKE 'hold.%'`); n != 0 {
		t.Fatalf("%d hold entries in the audit log after refused requests", n)
	}
	if n := a.count(`SELECT count(*) FROM audit_log WHERE action = 'audit.export'`); n != exportsBefore {
		t.Fatalf("%d audit.export entries after refused exports, want %d", n, exportsBefore)
	}

	// A hold placed and released twice: the second release is 409, the hold stays released.
	r := a.do("POST", holds, admin, map[string]any{"package_id": id, "reason": "case 7\nline two\ttabbed"})
	expect(t, r, http.StatusCreated)
	holdID := r.json(t)["id"].(string)
	expect(t, a.do("POST", holds+"/"+holdID+"/release", admin, nil), http.StatusOK)
	expect(t, a.do("POST", holds+"/"+holdID+"/release", admin, nil), http.StatusConflict)
	list := a.do("GET", holds, admin, nil)
	expect(t, list, http.StatusOK)
	if items := list.json(t)["items"].([]any); len(items) != 1 || items[0].(map[string]any)["active"] != false {
		t.Fatalf("holds after release: %v", items)
	}

	// The widest ranges a client may name export (streamed) and verify.
	for _, q := range []string{
		"?from=0001-01-02T00:00:00Z&to=9999-12-31T23:59:59Z",
		"?from=0000-01-01T00:00:00Z&to=9999-12-31T23:59:59-23:59",
		"?to=9999-12-31T23:59:59.999999999Z&format=csv",
	} {
		r := a.do("GET", export+q, admin, nil)
		expect(t, r, http.StatusOK)
		if n, b, err := audit.VerifyExport(bytes.NewReader(r.body)); err != nil || b != nil || n < 3 {
			t.Fatalf("export %s: %d entries, %v, %v", q, n, b, err)
		}
	}
	// The report's bounds: exactly 366 days is allowed, JSON and CSV.
	expect(t, a.do("GET", report+"?from=2023-01-01T00:00:00Z&to=2024-01-02T00:00:00Z", admin, nil), http.StatusOK)
	c := a.do("GET", report+"?format=csv", admin, nil)
	if c.status != http.StatusOK || !strings.HasPrefix(c.header.Get("Content-Type"), "text/csv") {
		t.Fatalf("report csv: %d %s", c.status, c.header.Get("Content-Type"))
	}
}

// TestActivityReportCSVCells: a name a spreadsheet would read as a formula is written
// as text in the activity report's CSV, as in the usage list's.
func TestActivityReportCSVCells(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	u, token := a.user("mallory@example.com", app.RoleRegular)
	if _, err := a.pool.Exec(context.Background(), `UPDATE users SET name = $1 WHERE id = $2`, `=HYPERLINK("http://evil.example/","x")`, u.ID); err != nil {
		t.Fatal(err)
	}
	a.sharedPackage(token, nil, "a.txt")
	r := a.do("GET", "/api/v1/admin/reports/activity?format=csv", admin, nil)
	if r.status != http.StatusOK {
		t.Fatalf("report: %d %s", r.status, r.body)
	}
	rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, row := range rows[1:] {
		if row[1] == "mallory@example.com" {
			found = true
			if strings.HasPrefix(row[2], "=") {
				t.Fatalf("name cell %q starts a formula", row[2])
			}
		}
	}
	if !found {
		t.Fatalf("no row for the sender in %v", rows)
	}
}

func TestHostileLanguages(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("lang@example.com", app.RoleRegular)
	expect(t, a.do("PATCH", "/api/v1/me", token, map[string]any{"language": "fr"}), http.StatusOK)

	patch := func(name string, body any, want int, headers ...string) hostileCase {
		return hostileCase{"PATCH /me: " + name, "PATCH", "/api/v1/me", body, headers, want}
	}
	cases := []hostileCase{
		patch("unknown", map[string]any{"language": "xx"}, http.StatusUnprocessableEntity),
		patch("empty", map[string]any{"language": ""}, http.StatusUnprocessableEntity),
		patch("capitals", map[string]any{"language": "EN"}, http.StatusUnprocessableEntity),
		patch("a region", map[string]any{"language": "en-US"}, http.StatusUnprocessableEntity),
		patch("padded", map[string]any{"language": " de"}, http.StatusUnprocessableEntity),
		patch("with a NUL", map[string]any{"language": "de\x00"}, http.StatusUnprocessableEntity),
		patch("very long", map[string]any{"language": strings.Repeat("de", 50000)}, http.StatusUnprocessableEntity),
		patch("a number", map[string]any{"language": 3}, http.StatusUnprocessableEntity),
		patch("a boolean", map[string]any{"language": true}, http.StatusUnprocessableEntity),
		patch("an array", map[string]any{"language": []string{"de"}}, http.StatusUnprocessableEntity),
		patch("an object", map[string]any{"language": map[string]any{"code": "de"}}, http.StatusUnprocessableEntity),
		patch("malformed JSON", `{"language": `, http.StatusUnprocessableEntity),
		patch("empty body", "", http.StatusUnprocessableEntity),
		patch("an array body", `["de"]`, http.StatusUnprocessableEntity),
		patch("a body past the limit", `{"language": "`+strings.Repeat("d", 2<<20)+`"}`, http.StatusRequestEntityTooLarge),
		patch("another media type", `{"language": "de"}`, http.StatusUnsupportedMediaType, "Content-Type", "text/plain"),
	}
	create := func(name string, extra map[string]any) hostileCase {
		body := map[string]any{"title": "t", "recipient_email": "r@example.com"}
		for k, v := range extra {
			body[k] = v
		}
		return hostileCase{"create: " + name, "POST", "/api/v1/packages", body, nil, http.StatusUnprocessableEntity}
	}
	many := func(lang any) map[string]any {
		return map[string]any{"recipients": []map[string]any{{"email": "r@example.com", "language": lang}}}
	}
	cases = append(cases,
		create("recipient_language unknown", map[string]any{"recipient_language": "klingon"}),
		create("recipient_language empty", map[string]any{"recipient_language": ""}),
		create("recipient_language capitals", map[string]any{"recipient_language": "DE"}),
		create("recipient_language very long", map[string]any{"recipient_language": strings.Repeat("x", 100000)}),
		create("recipient_language a number", map[string]any{"recipient_language": 7}),
		create("recipient_language an object", map[string]any{"recipient_language": map[string]any{}}),
		create("a recipient's language unknown", many("xx")),
		create("a recipient's language empty", many("")),
		create("a recipient's language a number", many(1)),
		create("a recipient's language with a NUL", many("de\x00")),
	)
	a.run(t, token, cases)
	if got := a.do("GET", "/api/v1/me", token, nil).json(t)["language"]; got != "fr" {
		t.Fatalf("language after refused changes: %v, want fr", got)
	}
	if n := a.rowCount("packages"); n != 0 {
		t.Fatalf("%d packages after refused creations", n)
	}

	// Accept-Language that is huge or malformed: the API and the pages answer as without
	// one (English), never an error.
	expect(t, a.do("PATCH", "/api/v1/me", token, map[string]any{"language": nil}), http.StatusOK)
	for name, al := range map[string]string{
		"huge":             strings.Repeat("de-DE;q=0.9, ", 5000),
		"many tags":        strings.Repeat("x,", 3000) + "de",
		"bad weight":       "de;q=abc",
		"weight over 1":    "de;q=2",
		"only separators":  ";;;,,,;q=",
		"bytes past ASCII": "\xfe\xff\x80de",
		"a long subtag":    "de-" + strings.Repeat("a", 4000),
		"star":             "*",
	} {
		t.Run("Accept-Language "+name, func(t *testing.T) {
			r := a.do("POST", "/api/v1/packages", token, map[string]any{"title": "t", "recipient_email": "r@example.com"}, "Accept-Language", al)
			expect(t, r, http.StatusCreated)
			if rs := r.json(t)["recipients"].([]any); rs[0].(map[string]any)["language"] == nil {
				t.Fatalf("recipient without a language: %v", rs)
			}
			for _, page := range []string{"/login", "/setup", "/p/" + strings.Repeat("A", 43)} {
				p := a.do("GET", page, "", nil, "Accept-Language", al)
				if p.status >= 500 || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") {
					t.Fatalf("GET %s: %d %s", page, p.status, p.header.Get("Content-Type"))
				}
			}
			expect(t, a.do("GET", "/api/v1/links/"+strings.Repeat("A", 43), "", nil, "Accept-Language", al), http.StatusGone)
			expect(t, a.do("GET", "/api/v1/nowhere", token, nil, "Accept-Language", al), http.StatusNotFound)
		})
	}
	// The language switcher's parameter and cookie, when garbage, are ignored.
	for _, q := range []string{"?lang=xx", "?lang=" + strings.Repeat("d", 5000), "?lang=%00", "?lang=de&lang=fr"} {
		p := a.do("GET", "/login"+q, "", nil, "Cookie", "shipfile_lang="+strings.Repeat("z", 3000))
		if p.status != http.StatusOK || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") {
			t.Fatalf("GET /login%s: %d %s", q, p.status, p.header.Get("Content-Type"))
		}
	}
}

// pngOf is a small PNG image.
func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 128, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// previewed creates a package with photo.png (with its preview made) and notes.txt,
// finalized when link; it returns the package id, the files' ids and the link token.
func (a *testAPI) previewed(t *testing.T, token string, fields map[string]any) (string, map[string]string, string) {
	t.Helper()
	body := map[string]any{"title": "Photos", "recipient_email": "r@example.com"}
	for k, v := range fields {
		body[k] = v
	}
	id := a.createPackage(token, body)["id"].(string)
	files := map[string]string{}
	for name, content := range map[string][]byte{"photo.png": pngOf(t, 64, 48), "notes.txt": []byte("not an image")} {
		r := a.upload("/api/v1/packages/"+id+"/files", token, name, content)
		expect(t, r, http.StatusCreated)
		files[name] = r.json(t)["id"].(string)
	}
	fid, err := uuid.Parse(files["photo.png"])
	if err != nil {
		t.Fatal(err)
	}
	if err := a.previews.Make(context.Background(), fid); err != nil {
		t.Fatal(err)
	}
	fin := a.do("POST", "/api/v1/packages/"+id+"/finalize", token, nil)
	expect(t, fin, http.StatusOK)
	return id, files, linkToken(t, fin.json(t)["magic_link"])
}

func TestHostilePreviews(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	_, other := a.user("other@example.com", app.RoleRegular)
	id, files, link := a.previewed(t, token, nil)
	_, pfiles, plink := a.previewed(t, token, map[string]any{"password": "open sesame"})
	_, rfiles, rlink := a.previewed(t, token, nil)
	rid := a.do("GET", "/api/v1/links/"+rlink, "", nil).json(t)["id"]
	expect(t, a.do("POST", "/api/v1/packages/"+rid.(string)+"/revoke", token, nil), http.StatusOK)
	eid, efiles, elink := a.previewed(t, token, nil)
	if _, err := a.pool.Exec(context.Background(), "UPDATE packages SET expires_at = now() - interval '1 second' WHERE id = $1", eid); err != nil {
		t.Fatal(err)
	}

	owner := func(fileID string) string { return "/api/v1/packages/" + id + "/files/" + fileID + "/preview" }
	viaLink := func(tok, fileID string) string { return "/api/v1/links/" + tok + "/files/" + fileID + "/preview" }
	photo := files["photo.png"]

	// The answers that succeed: whole, as image/jpeg, whatever Range or precondition
	// the client adds (a preview is served whole; a preview is never a partial answer).
	for name, headers := range map[string][]string{
		"plain":                   nil,
		"a range":                 {"Range", "bytes=0-10"},
		"a range past the end":    {"Range", "bytes=999999-"},
		"a malformed range":       {"Range", "bytes=abc"},
		"several ranges":          {"Range", "bytes=0-1,5-9"},
		"an If-Range":             {"Range", "bytes=0-10", "If-Range", "Wed, 21 Oct 2015 07:28:00 GMT"},
		"an If-Match":             {"If-Match", `"nope"`},
		"an If-Unmodified-Since":  {"If-Unmodified-Since", "Wed, 21 Oct 2015 07:28:00 GMT"},
		"a bad If-Modified-Since": {"If-Modified-Since", "yesterday"},
	} {
		for who, path := range map[string]string{"owner": owner(photo), "link": viaLink(link, photo)} {
			t.Run(who+" preview with "+name, func(t *testing.T) {
				tok := ""
				if who == "owner" {
					tok = token
				}
				r := a.do("GET", path, tok, nil, headers...)
				if r.status != http.StatusOK || r.header.Get("Content-Type") != "image/jpeg" || len(r.body) == 0 {
					t.Fatalf("%d %q, %d bytes: %.200s", r.status, r.header.Get("Content-Type"), len(r.body), r.body)
				}
				if _, format, err := image.DecodeConfig(bytes.NewReader(r.body)); err != nil || format != "jpeg" {
					t.Fatalf("body is not a JPEG: %v %s", err, format)
				}
				if got := r.header.Get("Accept-Ranges"); got != "none" {
					t.Errorf("Accept-Ranges = %q, want none (a preview is answered whole)", got)
				}
			})
		}
	}

	grant := func(tok, pw string) string {
		r := a.unlock(tok, pw)
		expect(t, r, http.StatusOK)
		return r.json(t)["grant"].(string)
	}
	good := grant(plink, "open sesame")
	a.run(t, token, []hostileCase{
		{"owner: package id not a UUID", "GET", "/api/v1/packages/abc/files/" + photo + "/preview", nil, nil, http.StatusNotFound},
		{"owner: file id not a UUID", "GET", owner("abc"), nil, nil, http.StatusNotFound},
		{"owner: an unknown file", "GET", owner("0190c0de-0000-7000-8000-000000000003"), nil, nil, http.StatusNotFound},
		{"owner: another package's file", "GET", owner(pfiles["photo.png"]), nil, nil, http.StatusNotFound},
		{"owner: a file with no preview", "GET", owner(files["notes.txt"]), nil, nil, http.StatusNotFound},
		{"owner: an unknown package", "GET", "/api/v1/packages/0190c0de-0000-7000-8000-000000000004/files/" + photo + "/preview", nil, nil, http.StatusNotFound},
		{"owner: a method it does not take", "POST", owner(photo), nil, nil, http.StatusMethodNotAllowed},
	})
	a.run(t, other, []hostileCase{
		{"another user's package", "GET", owner(photo), nil, nil, http.StatusForbidden},
	})
	a.run(t, "", []hostileCase{
		{"owner route without a token", "GET", owner(photo), nil, nil, http.StatusUnauthorized},
		{"link: unknown", "GET", viaLink(strings.Repeat("A", 43), photo), nil, nil, http.StatusGone},
		{"link: garbage token", "GET", viaLink("not-a-token", photo), nil, nil, http.StatusGone},
		{"link: a very long token", "GET", viaLink(strings.Repeat("A", 4000), photo), nil, nil, http.StatusGone},
		{"link: file id not a UUID", "GET", viaLink(link, "abc"), nil, nil, http.StatusNotFound},
		{"link: an unknown file", "GET", viaLink(link, "0190c0de-0000-7000-8000-000000000003"), nil, nil, http.StatusNotFound},
		{"link: another package's file", "GET", viaLink(link, pfiles["photo.png"]), nil, nil, http.StatusNotFound},
		{"link: a file with no preview", "GET", viaLink(link, files["notes.txt"]), nil, nil, http.StatusNotFound},
		{"link: revoked", "GET", viaLink(rlink, rfiles["photo.png"]), nil, nil, http.StatusGone},
		{"link: revoked, a bad file id", "GET", viaLink(rlink, "abc"), nil, nil, http.StatusGone},
		{"link: expired", "GET", viaLink(elink, efiles["photo.png"]), nil, nil, http.StatusGone},
		{"link: protected, no grant", "GET", viaLink(plink, pfiles["photo.png"]), nil, nil, http.StatusUnauthorized},
		{"link: protected, a forged grant", "GET", viaLink(plink, pfiles["photo.png"]), nil, []string{"Shipfile-Link-Grant", "forged"}, http.StatusUnauthorized},
		{"link: protected, another link's grant", "GET", viaLink(link, photo), nil, []string{"Shipfile-Link-Grant", good}, http.StatusOK},
		{"link: protected, a huge grant", "GET", viaLink(plink, pfiles["photo.png"]), nil, []string{"Shipfile-Link-Grant", strings.Repeat("g", 8000)}, http.StatusUnauthorized},
		{"link: wrong password", "POST", "/api/v1/links/" + plink + "/unlock", map[string]any{"password": "wrong one"}, nil, http.StatusUnauthorized},
		{"link: password a number", "POST", "/api/v1/links/" + plink + "/unlock", map[string]any{"password": 5}, nil, http.StatusUnprocessableEntity},
		{"link: a method it does not take", "POST", viaLink(link, photo), nil, nil, http.StatusMethodNotAllowed},
	})
	r := a.do("GET", viaLink(plink, pfiles["photo.png"]), "", nil, "Shipfile-Link-Grant", good)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "image/jpeg" {
		t.Fatalf("protected preview with its grant: %d %s", r.status, r.body)
	}

	// HEAD is no method of the preview routes: 405 with the JSON error's headers (a
	// HEAD answer has no body, so it is not one the contract check can read).
	for name, path := range map[string]string{"owner": owner(photo), "link": viaLink(link, photo)} {
		req, err := http.NewRequest("HEAD", a.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
			t.Fatalf("HEAD %s preview: %d %q", name, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	// A preview counts no download.
	var downloads int
	if err := a.pool.QueryRow(context.Background(), `SELECT coalesce(sum(download_count), 0) FROM files`).Scan(&downloads); err != nil || downloads != 0 {
		t.Fatalf("previews counted %d downloads (%v)", downloads, err)
	}
}

func TestHostileWebhookOrdering(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	good := func(o any) map[string]any {
		return map[string]any{"url": "https://hooks.example.com/x", "ordering": o}
	}
	var cases []hostileCase
	for name, o := range map[string]any{
		"capitals": "PACKAGE", "empty": "", "padded": " package", "per event": "event", "a number": 1,
		"a boolean": true, "an array": []string{"package"}, "an object": map[string]any{"by": "package"},
		"with a NUL": "package\x00", "very long": strings.Repeat("package", 10000),
	} {
		cases = append(cases, hostileCase{"create: ordering " + name, "POST", hooksPath, good(o), nil, http.StatusUnprocessableEntity})
	}
	a.run(t, admin, cases)
	if n := a.rowCount("webhook_subscriptions"); n != 0 {
		t.Fatalf("bad orderings wrote %d subscriptions", n)
	}
	hook := a.createWebhook(admin, good("package"))
	path := hookPath(hook["id"], "")
	cases = cases[:0]
	for name, o := range map[string]any{"capitals": "NONE", "unknown": "fifo", "a number": 0, "an array": []string{}} {
		cases = append(cases, hostileCase{"change: ordering " + name, "PATCH", path, map[string]any{"ordering": o}, nil, http.StatusUnprocessableEntity})
	}
	a.run(t, admin, cases)
	got := a.do("GET", path, admin, nil)
	expect(t, got, http.StatusOK)
	if got.json(t)["ordering"] != "package" {
		t.Fatalf("ordering after refused changes: %v", got.json(t)["ordering"])
	}
	// null on create is the default; null on a change leaves it as it is.
	created := a.createWebhook(admin, good(nil))
	if created["ordering"] != "none" {
		t.Fatalf("ordering null on create: %v, want none", created["ordering"])
	}
	r := a.do("PATCH", path, admin, map[string]any{"ordering": nil})
	expect(t, r, http.StatusOK)
	if r.json(t)["ordering"] != "package" {
		t.Fatalf("ordering null on a change: %v, want it kept", r.json(t)["ordering"])
	}
}
