package identity

import (
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

func TestLastAdminRule(t *testing.T) {
	regular, admin, yes, no := app.RoleRegular, app.RoleAdmin, true, false
	cases := []struct {
		name   string
		patch  app.UserPatch
		admins []int64
		target int64
		refuse bool
	}{
		{"demote the only admin", app.UserPatch{Role: &regular}, []int64{1}, 1, true},
		{"disable the only admin", app.UserPatch{Disabled: &yes}, []int64{1}, 1, true},
		{"demote one of two", app.UserPatch{Role: &regular}, []int64{1, 2}, 1, false},
		{"disable a regular user", app.UserPatch{Disabled: &yes}, []int64{1}, 7, false},
		{"keep the role", app.UserPatch{Role: &admin, Disabled: &no}, []int64{1}, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			refused := RemovesAdmin(tc.patch) && CheckLastAdmin(tc.admins, tc.target) != nil
			if refused != tc.refuse {
				t.Fatalf("refused = %v, want %v", refused, tc.refuse)
			}
		})
	}
}

func TestLoginAllowed(t *testing.T) {
	now := time.Now()
	later := now.Add(time.Minute)
	cases := []struct {
		name string
		c    LoginCount
		ok   bool
	}{
		{"first", LoginCount{Failures: 1}, true},
		{"the last allowed", LoginCount{Failures: 3}, true},
		{"one more", LoginCount{Failures: 4}, false},
		{"locked before", LoginCount{Failures: 1, LockedUntil: &later}, false},
	}
	for _, tc := range cases {
		if ok, _ := LoginAllowed(tc.c, now, 3, time.Minute); ok != tc.ok {
			t.Errorf("%s: allowed = %v", tc.name, ok)
		}
	}
}
