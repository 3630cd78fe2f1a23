package identity

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// OIDCStore is the persistence of sign-ins through the organization's OpenID
// provider (SPEC "Signing in with the organization's accounts").
type OIDCStore interface {
	GetUserByOIDC(ctx context.Context, issuer, subject string) (app.User, error)
	GetUserByEmail(ctx context.Context, email string) (app.User, error)
	// LinkUserOIDC links the user to (issuer, subject) while it has no identity
	// linked; otherwise ErrConflict.
	LinkUserOIDC(ctx context.Context, id int64, issuer, subject string) (app.User, error)
	// CreateOIDCUser creates a user without a password, linked to (issuer, subject);
	// an e-mail or identity taken meanwhile is ErrConflict.
	CreateOIDCUser(ctx context.Context, u app.NewUser, issuer, subject string) (app.User, error)
	SetUserRole(ctx context.Context, id int64, role app.Role) (app.User, error)
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
type OIDCRefusal struct{ Reason string }

func (e *OIDCRefusal) Error() string { return e.Reason }

// ErrOIDCRefused matches every *OIDCRefusal with errors.Is.
var ErrOIDCRefused = errors.New("oidc sign-in refused")

// Is makes errors.Is(err, ErrOIDCRefused) true for refusals.
func (e *OIDCRefusal) Is(target error) bool { return target == ErrOIDCRefused }

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
// address (email_verified), the user with that address (made beforehand by an
// admin), linked now; else a new regular or admin user. A disabled user, a person
// outside the allowed groups and an unverified address are refused (*OIDCRefusal),
// and then nothing is created or linked. The role follows the groups at every
// sign-in when the policy has admin groups.
func (s *Identity) SignInOIDC(ctx context.Context, st OIDCStore, c OIDCClaims, p OIDCPolicy) (app.User, error) {
	if c.Issuer == "" || c.Subject == "" {
		return app.User{}, refuse("The identity provider did not say who you are.")
	}
	if !p.Allowed(c.Groups) {
		return app.User{}, refuse("Your account at the identity provider is not in a group that may use shipfile. Ask your administrator for access.")
	}
	u, err := st.GetUserByOIDC(ctx, c.Issuer, c.Subject)
	if errors.Is(err, app.ErrNotFound) {
		u, err = s.firstOIDCSignIn(ctx, st, c, p)
	}
	if err != nil {
		return app.User{}, err
	}
	if u.Disabled {
		return app.User{}, refuse("Your shipfile account is disabled. Ask your administrator.")
	}
	if role, ok := p.Role(c.Groups); ok && role != u.Role {
		if u, err = st.SetUserRole(ctx, u.ID, role); err != nil {
			return app.User{}, err
		}
		// Tokens act with the user's role: this instance forgets them at once, the
		// others when the change feed tells them.
		s.cache.Forget(AuthChange{Kind: AuthChangeUser, ID: u.ID})
	}
	return u, nil
}

// firstOIDCSignIn links or creates the user of an identity seen for the first time.
func (s *Identity) firstOIDCSignIn(ctx context.Context, st OIDCStore, c OIDCClaims, p OIDCPolicy) (app.User, error) {
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
			return app.User{}, refuse("Your shipfile account is disabled. Ask your administrator.")
		}
		u, err := st.LinkUserOIDC(ctx, existing.ID, c.Issuer, c.Subject)
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
