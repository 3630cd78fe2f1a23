package web

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestClaimReader(t *testing.T) {
	obj := func(s string) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name         string
		idToken      string
		userinfo     string // "" : not asked
		wantEmail    string
		wantVerified bool
		wantGroups   []string
	}{
		{"all in the ID token", `{"email":"a@x.org","email_verified":true,"groups":["g1","g2"]}`, "", "a@x.org", true, []string{"g1", "g2"}},
		{"verified as a string", `{"email":"a@x.org","email_verified":"true","groups":"g1"}`, "", "a@x.org", true, []string{"g1"}},
		{"not verified", `{"email":"a@x.org","email_verified":false,"groups":[]}`, `{"email":"a@x.org","email_verified":true}`, "a@x.org", false, []string{}},
		{"verification from userinfo", `{"email":"a@x.org","groups":[]}`, `{"email":"a@x.org","email_verified":true}`, "a@x.org", true, []string{}},
		{"userinfo's verification of another address counts for nothing", `{"email":"a@x.org"}`, `{"email":"b@x.org","email_verified":true,"groups":["g"]}`, "a@x.org", false, []string{"g"}},
		{"a verification without an address counts for nothing", `{"email_verified":true}`, `{}`, "", false, nil},
		{"everything from userinfo", `{}`, `{"email":"a@x.org","email_verified":true,"groups":["g"]}`, "a@x.org", true, []string{"g"}},
		{"groups of another shape", `{"email":"a@x.org","email_verified":true,"groups":{"g":1}}`, "", "a@x.org", true, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := claimReader{groupsClaim: "groups"}
			c.read(obj(tt.idToken))
			if tt.userinfo != "" {
				c.read(obj(tt.userinfo))
			}
			if c.Email != tt.wantEmail || c.EmailVerified != tt.wantVerified || !slices.Equal(c.Groups, tt.wantGroups) || (c.Groups == nil) != (tt.wantGroups == nil) {
				t.Fatalf("got email %q verified %v groups %#v; want %q %v %#v", c.Email, c.EmailVerified, c.Groups, tt.wantEmail, tt.wantVerified, tt.wantGroups)
			}
		})
	}
}
