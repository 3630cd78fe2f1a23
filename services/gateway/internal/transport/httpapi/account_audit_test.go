package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/shipfile/shipfile/services/gateway/internal/agetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// auditDetails lists the details of the audit entries of action, oldest first.
func (a *testAPI) auditDetails(action string) []string {
	a.t.Helper()
	rows, err := a.pool.Query(context.Background(), `SELECT detail FROM audit_log WHERE action = $1 ORDER BY id`, action)
	if err != nil {
		a.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			a.t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// accountNotices lists the user's account notices (the mailer's security e-mails) as
// "event detail", oldest first.
func (a *testAPI) accountNotices(userID int64) []string {
	a.t.Helper()
	rows, err := a.pool.Query(context.Background(), `SELECT event || ' ' || detail FROM account_notices WHERE user_id = $1 ORDER BY id`, userID)
	if err != nil {
		a.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			a.t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// Setting and replacing the encryption key (PUT /api/v1/me/key) is audited and
// e-mailed to the owner, whichever token did it: a thief with a token cannot swap the
// key unnoticed.
func TestKeyChangeAuditedAndMailed(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	owner, token := a.user("owner@example.com", app.RoleRegular)
	put := func() string {
		t.Helper()
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		pub := id.Recipient().String()
		r := a.do("PUT", "/api/v1/me/key", token, map[string]any{"public_key": pub, "sealed_identity": agetest.SealWithPassphrase(t, id, "correct horse battery staple")})
		expect(t, r, http.StatusOK)
		return pub
	}
	first := put()
	second := put()
	got := a.auditDetails("key.set")
	want := []string{
		fmt.Sprintf("user %d: key set to %s", owner.ID, first),
		fmt.Sprintf("user %d: key %s replaced by %s", owner.ID, first, second),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := a.accountNotices(owner.ID); strings.Join(n, ",") != "key_changed "+first+",key_changed "+second {
		t.Fatalf("notices %v", n)
	}
	// A refused key changes nothing and tells nobody.
	expect(t, a.do("PUT", "/api/v1/me/key", token, map[string]any{"public_key": "age1nope", "sealed_identity": "x"}), http.StatusUnprocessableEntity)
	if len(a.auditDetails("key.set")) != 2 || len(a.accountNotices(owner.ID)) != 2 {
		t.Fatal("a refused key was audited or mailed")
	}
}

// Tokens' creation and revocation and an admin's role change are audited in the
// change's transaction; the role change is e-mailed to its user.
func TestAccountChangesAudited(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	admin, adminToken := a.user("admin@example.com", app.RoleAdmin)
	user, token := a.user("user@example.com", app.RoleRegular)

	r := a.do("POST", "/api/v1/me/tokens", token, map[string]any{"name": "ci"})
	expect(t, r, http.StatusCreated)
	created := r.json(t)
	prefix := created["prefix"].(string)
	if d := a.auditDetails("token.create"); len(d) == 0 || !strings.Contains(d[len(d)-1], fmt.Sprintf("user %d: token %s", user.ID, prefix)) {
		t.Fatalf("token.create entries %v", d)
	}
	id := int64(created["id"].(float64))
	expect(t, a.do("DELETE", fmt.Sprintf("/api/v1/me/tokens/%d", id), token, nil), http.StatusNoContent)
	if d := a.auditDetails("token.revoke"); len(d) != 1 || d[0] != fmt.Sprintf("user %d: token %d", user.ID, id) {
		t.Fatalf("token.revoke entries %v", d)
	}
	// Another user's token: 404, nothing audited.
	expect(t, a.do("DELETE", fmt.Sprintf("/api/v1/me/tokens/%d", id), adminToken, nil), http.StatusNotFound)
	if d := a.auditDetails("token.revoke"); len(d) != 1 {
		t.Fatalf("a refused revoke was audited: %v", d)
	}

	expect(t, a.do("PATCH", fmt.Sprintf("/api/v1/admin/users/%d", user.ID), adminToken, map[string]any{"role": "admin"}), http.StatusOK)
	want := fmt.Sprintf("user %d (user@example.com): regular -> admin, by user %d", user.ID, admin.ID)
	if d := a.auditDetails("user.role"); len(d) != 1 || d[0] != want {
		t.Fatalf("user.role entries %v, want %q", d, want)
	}
	if n := a.accountNotices(user.ID); strings.Join(n, ",") != "role_changed regular -> admin" {
		t.Fatalf("notices %v", n)
	}
	// A patch that leaves the role as it is changes no role.
	expect(t, a.do("PATCH", fmt.Sprintf("/api/v1/admin/users/%d", user.ID), adminToken, map[string]any{"name": "U"}), http.StatusOK)
	if len(a.auditDetails("user.role")) != 1 || len(a.accountNotices(user.ID)) != 1 {
		t.Fatal("a patch without a role change was audited as one")
	}
	// The token acts with the user's current role.
	expect(t, a.do("GET", "/api/v1/admin/users", token, nil), http.StatusOK)
	expect(t, a.do("PATCH", fmt.Sprintf("/api/v1/admin/users/%d", user.ID), adminToken, map[string]any{"role": "regular"}), http.StatusOK)
	expect(t, a.do("GET", "/api/v1/admin/users", token, nil), http.StatusForbidden)
}
