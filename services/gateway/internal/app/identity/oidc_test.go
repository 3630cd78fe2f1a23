package identity

import (
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

func TestOIDCPolicy(t *testing.T) {
	tests := []struct {
		name     string
		policy   OIDCPolicy
		groups   []string
		allowed  bool
		role     app.Role
		setsRole bool
	}{
		{"no groups configured", OIDCPolicy{}, nil, true, "", false},
		{"admin group member", OIDCPolicy{AdminGroups: []string{"ops", "admins"}}, []string{"staff", "admins"}, true, app.RoleAdmin, true},
		{"not in an admin group", OIDCPolicy{AdminGroups: []string{"admins"}}, []string{"staff"}, true, app.RoleRegular, true},
		{"group names are exact", OIDCPolicy{AdminGroups: []string{"admins"}}, []string{"Admins", "admins-old"}, true, app.RoleRegular, true},
		{"allowed", OIDCPolicy{AllowedGroups: []string{"staff"}}, []string{"staff"}, true, "", false},
		{"not allowed", OIDCPolicy{AllowedGroups: []string{"staff"}}, []string{"contractors"}, false, "", false},
		{"no groups at all", OIDCPolicy{AllowedGroups: []string{"staff"}, AdminGroups: []string{"admins"}}, nil, false, app.RoleRegular, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.policy.Allowed(tt.groups); got != tt.allowed {
				t.Errorf("Allowed = %v, want %v", got, tt.allowed)
			}
			role, ok := tt.policy.Role(tt.groups)
			if role != tt.role || ok != tt.setsRole {
				t.Errorf("app.Role = %q, %v; want %q, %v", role, ok, tt.role, tt.setsRole)
			}
		})
	}
}

func TestOIDCName(t *testing.T) {
	long := make([]rune, MaxNameLen+20)
	for i := range long {
		long[i] = 'é'
	}
	tests := []struct{ name, claim, email, want string }{
		{"the name claim", " Ada Lovelace ", "ada@example.com", "Ada Lovelace"},
		{"no name: the e-mail's local part", "", "ada@example.com", "ada"},
		{"control characters dropped", "Ada\x00\nL", "ada@example.com", "AdaL"},
		{"trimmed to the limit", string(long), "x@example.com", string(long[:MaxNameLen])},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := oidcName(OIDCClaims{Name: tt.claim, Email: tt.email}); got != tt.want {
				t.Errorf("oidcName = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAuthMethods(t *testing.T) {
	for _, tt := range []struct {
		u    app.User
		want string
	}{
		{app.User{}, ""},
		{app.User{PasswordHash: "x"}, "password"},
		{app.User{OIDCSubject: "s", OIDCIssuer: "i"}, "oidc"},
		{app.User{PasswordHash: "x", OIDCSubject: "s", OIDCIssuer: "i"}, "password,oidc"},
	} {
		got := ""
		for i, m := range tt.u.AuthMethods() {
			if i > 0 {
				got += ","
			}
			got += m
		}
		if got != tt.want {
			t.Errorf("AuthMethods(%+v) = %q, want %q", tt.u, got, tt.want)
		}
	}
}
