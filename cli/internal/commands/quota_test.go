package commands

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestQuota(t *testing.T) {
	var body string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/me/usage" || r.Header.Get("Authorization") != "Bearer sf_test" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"detail":"not found"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	defer hs.Close()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"no policy", `{"used_bytes":1536,"reserved_bytes":0,"quota_bytes":null,"active_packages":2,"policy":{}}`,
			"Used:      1.5 KiB (no quota)\nPackages:  2 in draft or active\n"},
		{"a quota and rules", `{"used_bytes":9663676416,"reserved_bytes":1073741824,"quota_bytes":10737418240,"active_packages":3,
			"policy":{"storage_quota_bytes":10737418240,"max_file_size":1073741824,"max_ttl_days":14,"max_active_packages":5,
			"max_downloads_ceiling":10,"require_password":true,"require_encryption":false,"allowed_recipient_domains":["partner.example"],"may_request_files":false}}`,
			"Used:      9 GiB of 10 GiB (100 %)\nReserved:  1 GiB by uploads under way\nPackages:  3 of 5 in draft or active\n" +
				"Largest file:            1 GiB\nLongest expiry:          14 days\nDownloads per link:      at most 10 (required)\n" +
				"Link password:           required\nRecipients:              only at partner.example\nFile requests:           not allowed\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body = tc.body
			code, stdout, stderr := runAs(t, hs.URL, "quota")
			if code != ExitOK || stdout != tc.want || stderr != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, tc.want)
			}
		})
	}
	t.Run("--json", func(t *testing.T) {
		body = `{"used_bytes":10,"reserved_bytes":5,"quota_bytes":100,"active_packages":1,"policy":{"storage_quota_bytes":100}}`
		code, stdout, _ := runAs(t, hs.URL, "quota", "--json")
		var u map[string]any
		if code != ExitOK || json.Unmarshal([]byte(stdout), &u) != nil || u["used_bytes"] != float64(10) || u["quota_bytes"] != float64(100) {
			t.Fatalf("exit %d, stdout %q", code, stdout)
		}
	})
	t.Run("an error", func(t *testing.T) {
		code, _, stderr := runAs(t, hs.URL+"/nope", "quota")
		if code != ExitFailed || !strings.Contains(stderr, "not found") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})
}
