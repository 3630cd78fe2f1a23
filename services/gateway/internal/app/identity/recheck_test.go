package identity

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

func TestLinksAtSignIn(t *testing.T) {
	for _, tt := range []struct {
		name string
		u    app.User
		want bool
	}{
		{"made by an admin for SSO", app.User{Role: app.RoleRegular}, true},
		{"has a password", app.User{Role: app.RoleRegular, PasswordHash: "h"}, false},
		{"an admin without a password", app.User{Role: app.RoleAdmin}, false},
		{"a password admin", app.User{Role: app.RoleAdmin, PasswordHash: "h"}, false},
		{"linked to another identity", app.User{Role: app.RoleRegular, OIDCIssuer: "i", OIDCSubject: "s"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := LinksAtSignIn(tt.u); got != tt.want {
				t.Errorf("LinksAtSignIn = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestActorAudit(t *testing.T) {
	c := app.Client{IP: "192.0.2.1", UserAgent: "ua"}
	e := UserActor(app.User{ID: 7}, c).Audit(ActionTokenCreate, "d")
	if e.Actor != "user" || e.ActorUserID == nil || *e.ActorUserID != 7 || e.IP != c.IP || e.Action != ActionTokenCreate || e.Detail != "d" {
		t.Errorf("user actor: %+v", e)
	}
	if e := System.Audit(ActionSessionEnded, ""); e.Actor != "system" || e.ActorUserID != nil {
		t.Errorf("system actor: %+v", e)
	}
	ch := RoleChange(System, app.User{ID: 3, Email: "a@example.com", Role: app.RoleRegular}, app.RoleAdmin, "by group sync")
	if len(ch.Audit) != 1 || ch.Audit[0].Detail != "user 3 (a@example.com): admin -> regular, by group sync" ||
		len(ch.Notices) != 1 || ch.Notices[0] != (AccountNotice{UserID: 3, Event: NoticeRoleChanged, Detail: "admin -> regular"}) {
		t.Errorf("role change: %+v", ch)
	}
}

// recheckFake is the store, the provider and the sealer of a recheck.
type recheckFake struct {
	OIDCStore
	user      app.User
	lastAdmin bool // SetUserRole refuses a demotion
	claims    OIDCClaims
	refresh   string // the refresh token the provider hands back
	err       error  // the provider's answer
	ended     []AccountChange
	roles     []AccountChange
	stored    string // the sealed refresh token kept
}

func (f *recheckFake) ClaimDueOIDCSessions(context.Context, time.Time, time.Time, int) ([]Session, error) {
	return nil, nil
}
func (f *recheckFake) SetSessionRefresh(_ context.Context, _ []byte, sealed string) error {
	f.stored = sealed
	return nil
}
func (f *recheckFake) EndOIDCSessions(_ context.Context, _ int64, _, _ string, ch AccountChange) error {
	f.ended = append(f.ended, ch)
	return nil
}
func (f *recheckFake) GetUser(context.Context, int64) (app.User, error) { return f.user, nil }
func (f *recheckFake) SetUserRole(_ context.Context, _ int64, role app.Role, change func(app.User) AccountChange) (app.User, error) {
	if f.lastAdmin && role != app.RoleAdmin {
		return app.User{}, app.Conflict("last admin")
	}
	u := f.user
	u.Role = role
	f.roles = append(f.roles, change(u))
	return u, nil
}
func (f *recheckFake) Refresh(_ context.Context, rt string) (OIDCClaims, string, error) {
	if rt != "refresh-1" {
		return OIDCClaims{}, "", errors.New("the sealed token was not opened")
	}
	return f.claims, f.refresh, f.err
}
func (f *recheckFake) Seal(s string) (string, error) { return "sealed:" + s, nil }
func (f *recheckFake) Open(s string) (string, error) {
	if !strings.HasPrefix(s, "sealed:") {
		return "", errors.New("not sealed")
	}
	return strings.TrimPrefix(s, "sealed:"), nil
}

// The recheck of one session: what the provider says decides whether the session
// ends, the role changes (never the last admin's) or the refresh token is kept anew.
func TestRecheckSession(t *testing.T) {
	policy := OIDCPolicy{AllowedGroups: []string{"staff", "admins"}, AdminGroups: []string{"admins"}}
	admin := app.User{ID: 5, Email: "a@example.com", Role: app.RoleAdmin}
	tests := []struct {
		name    string
		fake    recheckFake
		sealed  string
		ended   string // the ended sessions' audit detail, "" when none
		role    string // the role change's audit detail, "" when none
		stored  string
		wantErr bool
	}{
		{name: "still an admin", fake: recheckFake{user: admin, claims: OIDCClaims{Subject: "s", Groups: []string{"admins"}}, refresh: "refresh-1"}},
		{name: "left the admin group", fake: recheckFake{user: admin, claims: OIDCClaims{Subject: "s", Groups: []string{"staff"}}, refresh: "refresh-2"},
			role: "user 5 (a@example.com): admin -> regular, by group sync", stored: "sealed:refresh-2"},
		{name: "the last admin keeps the role", fake: recheckFake{user: admin, lastAdmin: true, claims: OIDCClaims{Subject: "s", Groups: []string{"staff"}}}},
		{name: "outside the allowed groups", fake: recheckFake{user: admin, claims: OIDCClaims{Subject: "s", Groups: []string{"contractors"}}},
			ended: "no longer in SHIPFILE_OIDC_ALLOWED_GROUPS"},
		{name: "refused", fake: recheckFake{user: admin, err: ErrRefreshRefused}, ended: "the provider refused the refresh token"},
		{name: "another subject", fake: recheckFake{user: admin, claims: OIDCClaims{Subject: "other", Groups: []string{"admins"}}},
			ended: "another identity"},
		{name: "the provider is down: nothing ends", fake: recheckFake{user: admin, err: errors.New("connection refused")}, wantErr: true},
		{name: "no refresh token", fake: recheckFake{user: admin}, sealed: "-", ended: "gave no refresh token"},
		{name: "a token that does not open", fake: recheckFake{user: admin}, sealed: "garbage", ended: "cannot be opened"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.fake
			id := NewIdentity(nil, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			r := NewOIDCRecheck(&f, &f, id, &f, &f, policy, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
			sealed := "sealed:refresh-1"
			switch tt.sealed {
			case "-":
				sealed = ""
			case "":
			default:
				sealed = tt.sealed
			}
			err := r.check(context.Background(), Session{UserID: 5, OIDC: &SessionOIDC{Issuer: "https://id", Subject: "s", SealedRefresh: sealed}})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			switch {
			case tt.ended == "" && len(f.ended) != 0:
				t.Errorf("sessions ended: %+v", f.ended)
			case tt.ended != "" && (len(f.ended) != 1 || !strings.Contains(f.ended[0].Audit[0].Detail, tt.ended)):
				t.Errorf("ended %+v, want %q", f.ended, tt.ended)
			}
			switch {
			case tt.role == "" && len(f.roles) != 0:
				t.Errorf("role changed: %+v", f.roles)
			case tt.role != "" && (len(f.roles) != 1 || f.roles[0].Audit[0].Detail != tt.role || f.roles[0].Notices[0].Event != NoticeRoleChanged):
				t.Errorf("role change %+v, want %q", f.roles, tt.role)
			}
			if f.stored != tt.stored {
				t.Errorf("stored refresh token %q, want %q", f.stored, tt.stored)
			}
		})
	}
}
