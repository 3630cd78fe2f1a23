package app

import "time"

// Role is what a user may do.
type Role string

// The roles.
const (
	RoleAdmin   Role = "admin"
	RoleRegular Role = "regular"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleAdmin || r == RoleRegular }

// User is a person who signs in to shipfile.
type User struct {
	ID           int64
	Email        string
	Name         string
	Role         Role
	PasswordHash string // empty: no password set, cannot sign in to the web UI
	Disabled     bool
	CreatedAt    time.Time
	// OIDCIssuer and OIDCSubject are the identity at the OpenID provider the user
	// signs in with (both empty: none linked).
	OIDCIssuer, OIDCSubject string
	// Language is the language the user chose (a pkg/i18n code) for the pages and the
	// e-mails about their packages and account; "": the browser's, and English e-mails.
	Language string
}

// AuthMethods is how the user signs in to the web UI: "password" when a password
// is set, "oidc" when an identity of the provider is linked (the user record's `auth`:
// docs/WEB-UI.md, "Signing in with the organization's accounts").
func (u User) AuthMethods() []string {
	out := []string{}
	if u.PasswordHash != "" {
		out = append(out, "password")
	}
	if u.OIDCSubject != "" {
		out = append(out, "oidc")
	}
	return out
}

// IsAdmin reports whether the user has the admin role.
func (u User) IsAdmin() bool { return u.Role == RoleAdmin }

// Token is an API token's record; the raw value is never stored.
type Token struct {
	ID         int64
	UserID     int64
	Name       string
	Prefix     string
	CreatedAt  time.Time
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
}

// TokenOwner is what a token hash resolves to: the token and the user it acts for.
type TokenOwner struct {
	TokenID    int64
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
	User       User
}

// NewUser is a user about to be created.
type NewUser struct {
	Email    string
	Name     string
	Role     Role
	Password string // optional
}

// UserPatch changes some fields of a user; nil fields stay as they are.
type UserPatch struct {
	Email    *string
	Name     *string
	Role     *Role
	Disabled *bool
	Password *string
}

// NewToken is a token about to be stored.
type NewToken struct {
	UserID    int64
	Name      string
	Prefix    string
	Hash      []byte
	ExpiresAt *time.Time
}
