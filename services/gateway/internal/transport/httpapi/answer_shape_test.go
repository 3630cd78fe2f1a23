package httpapi_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// shape is the JSON type of each key of an answer's object: string, number, bool,
// null, array or object.
func shape(t *testing.T, v any) map[string]string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%v is not a JSON object", v)
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		switch v.(type) {
		case string:
			out[k] = "string"
		case float64:
			out[k] = "number"
		case bool:
			out[k] = "bool"
		case nil:
			out[k] = "null"
		case []any:
			out[k] = "array"
		case map[string]any:
			out[k] = "object"
		default:
			out[k] = fmt.Sprintf("%T", v)
		}
	}
	return out
}

// expectShape fails when got's keys or their JSON types differ from want's.
func expectShape(t *testing.T, what string, got any, want map[string]string) {
	t.Helper()
	have := shape(t, got)
	var diff []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if have[k] != want[k] {
			diff = append(diff, fmt.Sprintf("%s: %q, want %q", k, have[k], want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(have)) {
		if _, ok := want[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: %q, want no such key", k, have[k]))
		}
	}
	if len(diff) > 0 {
		t.Errorf("%s:\n%s", what, strings.Join(diff, "\n"))
	}
}

// with is base plus extra.
func with(base map[string]string, extra map[string]string) map[string]string {
	out := maps.Clone(base)
	maps.Copy(out, extra)
	return out
}

// TestAnswerShapes pins the keys of the package domain's and the policy's answers and
// the JSON type of each, nulls and empty arrays included: the answers are generated
// types (pkg/apiclient), and proto/openapi.yaml's contract check alone would let an
// optional key go missing.
func TestAnswerShapes(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	_, token := a.user("owner@example.com", app.RoleRegular)

	draftPackage := map[string]string{
		"id": "string", "title": "string", "recipient_email": "string", "recipient_name": "string",
		"direction": "string", "state": "string", "ttl_days": "number", "note": "string",
		"owner_user_id": "number", "file_count": "number", "total_size": "number",
		"created_at": "string", "finalized_at": "null", "expires_at": "string", "revoked_at": "null",
		"link_use_count": "number", "link_last_used_at": "null", "password_protected": "bool",
		"max_downloads": "null", "notify_owner": "bool", "encryption": "string", "on_hold": "bool",
		"recipients": "array",
	}
	recipient := map[string]string{
		"id": "string", "email": "string", "name": "string", "language": "string",
		"link_state": "string", "download_count": "number", "last_used_at": "null",
	}

	p := a.createPackage(token, map[string]any{"title": "Shapes", "recipients": []map[string]any{
		{"email": "bob@example.com", "name": "Bob"}, {"email": "carol@example.com"},
	}})
	expectShape(t, "created package", p, draftPackage)
	id := p["id"].(string)

	t.Run("a draft without files lists files as []", func(t *testing.T) {
		r := a.do("GET", "/api/v1/packages/"+id, token, nil)
		expect(t, r, http.StatusOK)
		got := r.json(t)
		expectShape(t, "package detail", got, with(draftPackage, map[string]string{"files": "array"}))
		if files, _ := got["files"].([]any); files == nil || len(files) != 0 {
			t.Fatalf("files = %v, want []", got["files"])
		}
	})

	expect(t, a.upload("/api/v1/packages/"+id+"/files", token, "a.txt", []byte("hello")), http.StatusCreated)

	t.Run("package detail with files and recipients", func(t *testing.T) {
		r := a.do("GET", "/api/v1/packages/"+id, token, nil)
		expect(t, r, http.StatusOK)
		got := r.json(t)
		expectShape(t, "package detail", got, with(draftPackage, map[string]string{"files": "array"}))
		files := got["files"].([]any)
		if len(files) != 1 {
			t.Fatalf("files = %v", files)
		}
		f := files[0].(map[string]any)
		scannedAt := "null"
		if f["scanned_at"] != nil {
			scannedAt = "string"
			assertUTC(t, f["scanned_at"])
		}
		expectShape(t, "file", f, map[string]string{
			"id": "string", "filename": "string", "size": "number", "content_type": "string", "sha256": "string",
			"uploaded_by": "string", "recipient_id": "null", "created_at": "string", "download_count": "number",
			"scan": "string", "scan_signature": "null", "scanned_at": scannedAt, "scan_released_by": "null",
			"scan_released_at": "null", "encrypted": "bool", "manifest": "null", "preview": "bool",
		})
		assertUTC(t, f["created_at"])
		rs := got["recipients"].([]any)
		if len(rs) != 2 {
			t.Fatalf("recipients = %v", rs)
		}
		for _, r := range rs {
			expectShape(t, "recipient", r, recipient)
		}
		assertUTC(t, got["created_at"])
		assertUTC(t, got["expires_at"])
	})

	t.Run("the finalize answer adds the links, not the files", func(t *testing.T) {
		r := a.do("POST", "/api/v1/packages/"+id+"/finalize", token, nil)
		expect(t, r, http.StatusOK)
		got := r.json(t)
		expectShape(t, "finalized package", got, with(draftPackage, map[string]string{
			"finalized_at": "string", "magic_link": "string", "links": "array",
		}))
		assertUTC(t, got["finalized_at"])
		links := got["links"].([]any)
		if len(links) != 2 {
			t.Fatalf("links = %v", links)
		}
		for _, l := range links {
			expectShape(t, "link", l, map[string]string{"recipient_id": "string", "email": "string", "magic_link": "string"})
		}
	})

	t.Run("a list's last page has next_cursor null", func(t *testing.T) {
		r := a.do("GET", "/api/v1/packages", token, nil)
		expect(t, r, http.StatusOK)
		got := r.json(t)
		expectShape(t, "package list", got, map[string]string{"items": "array", "next_cursor": "null"})
		expectShape(t, "listed package", got["items"].([]any)[0], with(draftPackage, map[string]string{"finalized_at": "string", "state": "string"}))
	})

	t.Run("a policy names every limit, null where there is none", func(t *testing.T) {
		r := a.do("GET", "/api/v1/admin/policies/default", admin, nil)
		expect(t, r, http.StatusOK)
		expectShape(t, "default policy", r.json(t), map[string]string{
			"storage_quota_bytes": "null", "max_file_size": "null", "max_package_size": "null", "max_ttl_days": "null",
			"max_active_packages": "null", "max_downloads_ceiling": "null", "require_password": "null",
			"require_encryption": "null", "allowed_recipient_domains": "null", "may_request_files": "null",
		})
	})
}
