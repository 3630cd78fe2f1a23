package servicetest_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// errRecorder is a testing.TB that records Errorf instead of failing.
type errRecorder struct {
	testing.TB
	errs []string
}

func (r *errRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, strings.TrimSpace(strings.SplitN(fmt.Sprintf(format, args...), "\n", 2)[0]))
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestContractChecksAnswers gives answers that keep and break proto/openapi.yaml and
// checks that the validating transport tells them apart.
func TestContractChecksAnswers(t *testing.T) {
	t.Parallel()
	pkgDetail := `{"id": "0197a8f4-0000-7000-8000-000000000001", "title": "T", "recipient_email": "r@example.com",
		"recipient_name": "", "direction": "outbound", "state": "draft", "ttl_days": 7, "note": "", "owner_user_id": 1,
		"file_count": 0, "total_size": 0, "created_at": "2026-01-02T03:04:05Z", "finalized_at": null,
		"expires_at": "2026-01-09T03:04:05Z", "revoked_at": null, "link_use_count": 0, "link_last_used_at": null, "password_protected": false,
		"max_downloads": null, "notify_owner": true, "encryption": "none", "on_hold": false, "recipients": [], "files": []}`
	me := `{"id": 1, "email": "a@example.com", "name": "A", "role": "admin", "created_at": "2026-01-02T03:04:05Z", "language": null}`
	tests := []struct {
		name   string
		path   string
		status int
		header map[string]string
		body   string
		want   string // "" when the answer keeps the contract
	}{
		{"a documented answer", "/api/v1/me", 200, nil, me, ""},
		{"an error answer", "/api/v1/me", 401, map[string]string{"WWW-Authenticate": "Bearer"}, `{"detail": "no token"}`, ""},
		{"a 503 any endpoint may give", "/api/v1/me", 503, map[string]string{"Retry-After": "1"}, `{"detail": "down"}`, ""},
		{"a 503 without Retry-After", "/api/v1/me", 503, nil, `{"detail": "down"}`, "without Retry-After"},
		{"a field of another type", "/api/v1/me", 200, nil, strings.Replace(me, `"id": 1`, `"id": "1"`, 1), "does not match"},
		{"a required field missing", "/api/v1/me", 200, nil, strings.Replace(me, `"name": "A", `, "", 1), "does not match"},
		{"a field the document does not name", "/api/v1/me", 200, nil, strings.Replace(me, `{`, `{"extra": true, `, 1), "does not match"},
		{"a value outside the enum", "/api/v1/me", 200, nil, strings.Replace(me, `"admin"`, `"root"`, 1), "does not match"},
		{"a date-time that is not one", "/api/v1/me", 200, nil, strings.Replace(me, `2026-01-02T03:04:05Z`, `yesterday`, 1), "does not match"},
		{"a status the operation does not document", "/api/v1/me", 418, nil, `{"detail": "teapot"}`, "does not match"},
		{"an allOf answer (PackageDetail)", "/api/v1/packages/0197a8f4-0000-7000-8000-000000000001", 200, nil, pkgDetail, ""},
		{"an allOf answer with a field of neither part", "/api/v1/packages/0197a8f4-0000-7000-8000-000000000001", 200, nil,
			strings.Replace(pkgDetail, `"files": []`, `"files": [], "extra": 1`, 1), "does not match"},
		{"an allOf answer without a part's required field", "/api/v1/packages/0197a8f4-0000-7000-8000-000000000001", 200, nil,
			strings.Replace(pkgDetail, `, "files": []`, ``, 1), "does not match"},
		{"an undocumented operation", "/api/v1/nope", 200, nil, `{}`, "not an operation"},
		{"a path outside the API", "/readyz", 200, nil, `ok`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The answer comes from a RoundTripper, not a server: the check needs no network.
			answer := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				h := http.Header{"Content-Type": {"application/json"}}
				for k, v := range tt.header {
					h.Set(k, v)
				}
				return &http.Response{StatusCode: tt.status, Header: h, Body: io.NopCloser(strings.NewReader(tt.body)), Request: r}, nil
			})
			rec := &errRecorder{TB: t}
			c := &http.Client{Transport: servicetest.MustContract(t).Transport(rec, answer)}
			resp, err := c.Get("http://127.0.0.1:1" + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := io.ReadAll(resp.Body); string(b) != tt.body {
				t.Errorf("the body handed on is %q, want %q", b, tt.body)
			}
			resp.Body.Close()
			switch {
			case tt.want == "" && len(rec.errs) > 0:
				t.Errorf("a good answer failed: %v", rec.errs)
			case tt.want != "" && (len(rec.errs) != 1 || !strings.Contains(rec.errs[0], tt.want)):
				t.Errorf("errors %q, want one with %q", rec.errs, tt.want)
			}
		})
	}
}

// TestEveryOperationHasAnOperationID: a client generated from the document gets stable
// camelCase names, each once.
func TestEveryOperationHasAnOperationID(t *testing.T) {
	t.Parallel()
	camel := regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	seen := map[string]string{}
	for path, op := range servicetest.MustContract(t).Operations() {
		id := op.OperationID
		switch {
		case !camel.MatchString(id):
			t.Errorf("%s: operationId %q is not camelCase", path, id)
		case seen[id] != "":
			t.Errorf("%s: operationId %q is also on %s", path, id, seen[id])
		}
		seen[id] = path
	}
	if len(seen) < 30 {
		t.Errorf("%d operations; the document did not load", len(seen))
	}
}
