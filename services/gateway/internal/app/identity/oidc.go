package identity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// OIDCStore is the persistence of sign-ins through the organization's OpenID
// provider (docs/WEB-UI.md, "Signing in with the organization's accounts").
type OIDCStore interface {
	GetUserByOIDC(ctx context.Context, issuer, subject string) (app.User, error)
	GetUserByEmail(ctx context.Context, email string) (app.User, error)
	// LinkUserOIDC links the user to (issuer, subject) while it has no identity
	// linked (otherwise ErrConflict), and writes ch in the same transaction.
	LinkUserOIDC(ctx context.Context, id int64, issuer, subject string, ch AccountChange) (app.User, error)
	// UnlinkUserOIDC removes the user's identity (issuer, subject), ends the
	// sessions begun through it and writes ch, in one transaction; ErrConflict when
	// the user has no such identity or no password.
	UnlinkUserOIDC(ctx context.Context, id int64, issuer, subject string, ch AccountChange) (app.User, error)
	// CreateOIDCUser creates a user without a password, linked to (issuer, subject);
	// an e-mail or identity taken meanwhile is ErrConflict.
	CreateOIDCUser(ctx context.Context, u app.NewUser, issuer, subject string) (app.User, error)
	// SetUserRole sets the user's role and writes change(the user after) in the same
	// transaction; demoting the last active admin is ErrConflict and changes nothing.
	SetUserRole(ctx context.Context, id int64, role app.Role, change func(after app.User) AccountChange) (app.User, error)
	// WriteAccountChange writes audit entries and notices that go with no other change.
	WriteAccountChange(ctx context.Context, ch AccountChange) error
	// InsertOIDCLogin, TakeOIDCLogin: a sign-in under way; TakeOIDCLogin removes the
	// row it returns (ErrNotFound when there is none), so each is used once.
	InsertOIDCLogin(ctx context.Context, l OIDCLogin) error
	TakeOIDCLogin(ctx context.Context, stateHash []byte) (OIDCLogin, error)
	DeleteStaleOIDCLogins(ctx context.Context, before time.Time) error
}

// OIDCLogin is a sign-in sent to the provider and not yet back: what the callback
// checks (the state's hash, the nonce) and sends (the PKCE verifier).
type OIDCLogin struct {
	StateHash []byte
	Nonce     string
	Verifier  string
	Next      string
	CreatedAt time.Time
	// LinkUserID: the sign-in links the identity to this signed-in user (from the
	// account page) instead of signing in; 0 for a sign-in.
	LinkUserID int64
}

// OIDCClaims is what a verified ID token says of its user.
type OIDCClaims struct {
	Issuer, Subject string
	Email           string
	EmailVerified   bool
	Name            string
	Groups          []string
}

// OIDCPolicy is what the gateway makes of the provider's groups.
type OIDCPolicy struct {
	// AdminGroups: members are admins, the others regular, set at every sign-in;
	// empty: the role is left to admins.
	AdminGroups []string
	// AllowedGroups: when set, only members may sign in.
	AllowedGroups []string
}

// OIDCRefusal is a sign-in the gateway refuses: the provider vouched for the
// person, but shipfile does not let them in. Its message is shown to them.
type OIDCRefusal struct {
	Reason        string
	accountExists bool
}

func (e *OIDCRefusal) Error() string { return e.Reason }

// ErrOIDCRefused matches every *OIDCRefusal with errors.Is.
var ErrOIDCRefused = errors.New("oidc sign-in refused")

// Is makes errors.Is(err, ErrOIDCRefused) true for refusals.
func (e *OIDCRefusal) Is(target error) bool {
	return target == ErrOIDCRefused || (e.accountExists && target == ErrOIDCAccountExists)
}

func refuse(reason string) error { return &OIDCRefusal{Reason: reason} }

// Allowed reports whether a member of groups may sign in under the policy.
func (p OIDCPolicy) Allowed(groups []string) bool {
	return len(p.AllowedGroups) == 0 || intersects(p.AllowedGroups, groups)
}

// Role is the role a member of groups gets, and false when the policy leaves
// roles to admins.
func (p OIDCPolicy) Role(groups []string) (app.Role, bool) {
	if len(p.AdminGroups) == 0 {
		return "", false
	}
	if intersects(p.AdminGroups, groups) {
		return app.RoleAdmin, true
	}
	return app.RoleRegular, true
}

func intersects(a, b []string) bool {
	return slices.ContainsFunc(a, func(g string) bool { return slices.Contains(b, g) })
}

// SignInOIDC returns the shipfile user of a verified identity, under the policy:
// the user linked to (issuer, sub); else, when the provider vouches for the e-mail
// address (email_verified), the user with that address (made beforehand by an admin
// for SSO: no password, not an admin), linked now; else a new regular or admin user.
// An address that belongs to an account with a password or to an admin is never
// linked here (ErrOIDCAccountExists, audited): its owner links the identity from
// their account page (LinkOIDC). A disabled user, a person outside the allowed
// groups and an unverified address are refused (*OIDCRefusal), and then nothing is
// created or linked. The role follows the groups at every sign-in when the policy
// has admin groups, except that the last active admin is never demoted.
func (s *Identity) SignInOIDC(ctx context.Context, st OIDCStore, c OIDCClaims, p OIDCPolicy, client app.Client) (app.User, error) {
	if c.Issuer == "" || c.Subject == "" {
		return app.User{}, refuse("The identity provider did not say who you are.")
	}
	if !p.Allowed(c.Groups) {
		return app.User{}, refuse(refusedGroups)
	}
	u, err := st.GetUserByOIDC(ctx, c.Issuer, c.Subject)
	if errors.Is(err, app.ErrNotFound) {
		u, err = s.firstOIDCSignIn(ctx, st, c, p, client)
	}
	if err != nil {
		return app.User{}, err
	}
	if u.Disabled {
		return app.User{}, refuse(refusedDisabled)
	}
	if role, ok := p.Role(c.Groups); ok && role != u.Role {
		if u, err = s.syncRole(ctx, st, u, role, System); err != nil {
			return app.User{}, err
		}
	}
	if err := s.syncGroups(ctx, u.ID, c.Groups); err != nil {
		return app.User{}, err
	}
	return u, nil
}

// Refusal texts shown to the person signing in.
const (
	refusedGroups   = "Your account at the identity provider is not in a group that may use shipfile. Ask your administrator for access."
	refusedDisabled = "Your shipfile account is disabled. Ask your administrator."
	// RefusedAccountExists is the refusal of a first SSO sign-in whose address
	// belongs to an account that signs in with a password, or to an admin.
	RefusedAccountExists = "The e-mail address your identity provider gave belongs to an existing shipfile account. " +
		"If it is yours, sign in with its password and link your organization's account from the Account page (Link SSO)."
)

// syncRole sets u's role to the one the groups give, with its audit entry and the
// user's e-mail, unless that demotes the last active admin: then u keeps the role
// and a warning is logged.
func (s *Identity) syncRole(ctx context.Context, st OIDCStore, u app.User, role app.Role, by Actor) (app.User, error) {
	before := u.Role
	changed, err := st.SetUserRole(ctx, u.ID, role, func(after app.User) AccountChange {
		return RoleChange(by, after, before, "by group sync")
	})
	if errors.Is(err, app.ErrConflict) {
		s.log.Warn("group sync would demote the last active admin: the role is kept", "user_id", u.ID)
		return u, nil
	}
	if err != nil {
		return app.User{}, err
	}
	// Tokens act with the user's role: this instance forgets them at once, the
	// others when the change feed tells them.
	s.cache.Forget(AuthChange{Kind: AuthChangeUser, ID: u.ID})
	return changed, nil
}

// firstOIDCSignIn links or creates the user of an identity seen for the first time.
func (s *Identity) firstOIDCSignIn(ctx context.Context, st OIDCStore, c OIDCClaims, p OIDCPolicy, client app.Client) (app.User, error) {
	if !c.EmailVerified {
		return app.User{}, refuse("The identity provider has not verified your e-mail address, so shipfile cannot tell which account is yours. Verify it there and sign in again.")
	}
	email, err := app.NormalizeEmail(c.Email)
	if err != nil {
		return app.User{}, refuse("The identity provider gave no usable e-mail address.")
	}
	existing, err := st.GetUserByEmail(ctx, email)
	switch {
	case err == nil:
		if existing.Disabled {
			return app.User{}, refuse(refusedDisabled)
		}
		if !LinksAtSignIn(existing) {
			refusal := System.Audit(ActionSSOLinkRefuse, fmt.Sprintf("%s: issuer %s, subject %s", userRef(existing), c.Issuer, c.Subject))
			refusal.IP, refusal.UserAgent = client.IP, client.UserAgent
			if err := st.WriteAccountChange(ctx, AccountChange{Audit: []app.AuditEntry{refusal}}); err != nil {
				return app.User{}, err
			}
			return app.User{}, &OIDCRefusal{Reason: RefusedAccountExists, accountExists: true}
		}
		u, err := st.LinkUserOIDC(ctx, existing.ID, c.Issuer, c.Subject, linkChange(UserActor(existing, client), existing, c.Issuer, c.Subject, true))
		if errors.Is(err, app.ErrConflict) {
			return app.User{}, refuse("The shipfile account with your e-mail address is linked to another identity. Ask your administrator.")
		}
		return u, err
	case !errors.Is(err, app.ErrNotFound):
		return app.User{}, err
	}
	role, ok := p.Role(c.Groups)
	if !ok {
		role = app.RoleRegular
	}
	u, err := st.CreateOIDCUser(ctx, app.NewUser{Email: email, Name: oidcName(c), Role: role}, c.Issuer, c.Subject)
	if errors.Is(err, app.ErrConflict) {
		// A parallel first sign-in of the same person created it meanwhile.
		return st.GetUserByOIDC(ctx, c.Issuer, c.Subject)
	}
	return u, err
}

// LinksAtSignIn reports whether a first SSO sign-in with u's address may link to u:
// only an account made for SSO (no password, no identity yet) that is not an admin.
func LinksAtSignIn(u app.User) bool {
	return u.PasswordHash == "" && u.Role != app.RoleAdmin && u.OIDCSubject == ""
}

// ErrOIDCAccountExists matches the refusal of a first SSO sign-in whose address
// belongs to an account it may not take (errors.Is).
var ErrOIDCAccountExists = errors.New("the address belongs to an existing account")

// LinkOIDC links the verified identity c to the signed-in user u, who proved both
// (their session and a sign-in at the provider just now), with its audit entry and
// the user's e-mail. An identity linked to another user, a user linked to another
// identity and a person outside the allowed groups are refused (*OIDCRefusal).
func (s *Identity) LinkOIDC(ctx context.Context, st OIDCStore, u app.User, c OIDCClaims, p OIDCPolicy, client app.Client) (app.User, error) {
	if c.Issuer == "" || c.Subject == "" {
		return app.User{}, refuse("The identity provider did not say who you are.")
	}
	if !p.Allowed(c.Groups) {
		return app.User{}, refuse(refusedGroups)
	}
	other, err := st.GetUserByOIDC(ctx, c.Issuer, c.Subject)
	switch {
	case err == nil && other.ID == u.ID:
		return other, nil
	case err == nil:
		return app.User{}, refuse("That account at the identity provider is already linked to another shipfile account.")
	case !errors.Is(err, app.ErrNotFound):
		return app.User{}, err
	}
	if u.OIDCSubject != "" {
		return app.User{}, refuse("Your shipfile account is linked to another account at the identity provider. Unlink it first.")
	}
	linked, err := st.LinkUserOIDC(ctx, u.ID, c.Issuer, c.Subject, linkChange(UserActor(u, client), u, c.Issuer, c.Subject, true))
	if errors.Is(err, app.ErrConflict) {
		return app.User{}, refuse("That account at the identity provider is already linked to another shipfile account.")
	}
	return linked, err
}

// UnlinkOIDC removes u's identity of the provider, with its audit entry and the
// user's e-mail, and ends the sessions begun through it. Only a user with a password
// may: without one, nobody could sign in to the account any more.
func (s *Identity) UnlinkOIDC(ctx context.Context, st OIDCStore, u app.User, client app.Client) (app.User, error) {
	if u.OIDCSubject == "" {
		return app.User{}, app.Conflict("no identity of the provider is linked to this account")
	}
	if u.PasswordHash == "" {
		return app.User{}, app.Conflict("this account signs in only through the identity provider: it cannot be unlinked")
	}
	return st.UnlinkUserOIDC(ctx, u.ID, u.OIDCIssuer, u.OIDCSubject, linkChange(UserActor(u, client), u, u.OIDCIssuer, u.OIDCSubject, false))
}

// oidcName is the name of a new user: the name claim, else the e-mail's local part,
// trimmed to the limits of a name.
func oidcName(c OIDCClaims) string {
	name := strings.Map(func(r rune) rune {
		if app.IsControl(r) {
			return -1
		}
		return r
	}, strings.TrimSpace(c.Name))
	if name == "" {
		name, _, _ = strings.Cut(c.Email, "@")
	}
	if r := []rune(name); len(r) > MaxNameLen {
		name = string(r[:MaxNameLen])
	}
	return name
}
