package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
)

// usage is GET /api/v1/me/usage for the browser's session.
func (b *browser) usage() map[string]any {
	b.t.Helper()
	resp, err := b.client.Get(b.e.url + "/api/v1/me/usage")
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != http.StatusOK {
		b.t.Fatalf("GET /api/v1/me/usage: %d %v", resp.StatusCode, err)
	}
	return m
}

// TestOIDCGroupDecidesPolicy: an SSO user's groups at the provider make them a member
// of the groups whose oidc_groups name them, at sign-in, so that group's policy is
// theirs; a user the claim does not name keeps the default policy, and a membership
// taken from a claim that stops naming the group goes at the next sign-in.
func TestOIDCGroupDecidesPolicy(t *testing.T) {
	gina := staff("gina", "contractors")
	e := newOIDCEnv(t, "", gina, staff("hank"))
	ctx := context.Background()
	var gid int64
	if err := e.pool.QueryRow(ctx, `INSERT INTO policy_groups (name, policy, oidc_groups)
		VALUES ('contractors', '{"storage_quota_bytes": 12345, "max_ttl_days": 3}', '{contractors}') RETURNING id`).Scan(&gid); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE default_policy SET policy = '{"storage_quota_bytes": 999}'`); err != nil {
		t.Fatal(err)
	}
	signIn := func(username string) *browser {
		t.Helper()
		b := e.browser()
		p, at := e.providerLogin(b, username, username+"-password", false)
		if p.status != http.StatusOK || at.Path != "/" {
			t.Fatalf("%s: sign-in ended at %s with %d", username, at, p.status)
		}
		return b
	}
	if u := signIn("gina").usage(); u["quota_bytes"] != float64(12345) || u["policy"].(map[string]any)["max_ttl_days"] != float64(3) {
		t.Fatalf("gina's usage = %v, want the contractors' policy", u)
	}
	var source string
	if err := e.pool.QueryRow(ctx, `SELECT m.source FROM policy_group_members m JOIN users u ON u.id = m.user_id
		WHERE m.group_id = $1 AND u.email = 'gina@example.com'`, gid).Scan(&source); err != nil || source != "oidc" {
		t.Fatalf("gina's membership: %q, %v; want one taken from the claim", source, err)
	}
	if u := signIn("hank").usage(); u["quota_bytes"] != float64(999) {
		t.Fatalf("hank's quota = %v, want the default policy's 999", u["quota_bytes"])
	}
	// The provider no longer names the group: the next sign-in ends the membership.
	if _, err := e.pool.Exec(ctx, `UPDATE policy_groups SET oidc_groups = '{others}' WHERE id = $1`, gid); err != nil {
		t.Fatal(err)
	}
	if u := signIn("gina").usage(); u["quota_bytes"] != float64(999) {
		t.Fatalf("gina's quota after the claim stopped naming the group = %v, want the default's 999", u["quota_bytes"])
	}
}
