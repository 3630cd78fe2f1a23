package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// IdentityStore is the persistence the identity service needs.
type IdentityStore interface {
	CreateUser(ctx context.Context, u app.NewUser, passwordHash string) (app.User, error)
	// CreateFirstUser creates the user only while no user exists (atomically, so two
	// racing calls create one user); otherwise it answers ErrNotFound.
	CreateFirstUser(ctx context.Context, u app.NewUser, passwordHash string) (app.User, error)
	GetUser(ctx context.Context, id int64) (app.User, error)
	GetUserByEmail(ctx context.Context, email string) (app.User, error)
	ListUsers(ctx context.Context) ([]app.User, error)
	CountUsers(ctx context.Context) (int64, error)
	// UpdateUser applies the patch and writes change(the user before, after) in the
	// same transaction.
	UpdateUser(ctx context.Context, id int64, p app.UserPatch, passwordHash *string, change func(before, after app.User) AccountChange) (app.User, error)
	// CreateToken and DeleteToken write ch in the token's transaction.
	CreateToken(ctx context.Context, t app.NewToken, ch AccountChange) (app.Token, error)
	ListTokens(ctx context.Context, userID int64) ([]app.Token, error)
	DeleteToken(ctx context.Context, userID, id int64, ch AccountChange) error
	TokenOwner(ctx context.Context, hash []byte) (app.TokenOwner, error)
	TokenUsageStore
	// SetUserLanguage sets the user's language, or clears it (nil).
	SetUserLanguage(ctx context.Context, id int64, language *string) (app.User, error)
	// DeleteUserSessions signs the user out of every browser.
	DeleteUserSessions(ctx context.Context, userID int64) error
}

// Identity manages users and API tokens.
type Identity struct {
	store  IdentityStore
	hasher *app.Hasher
	now    func() time.Time
	cache  *TokenCache // nil: every request reads the token from the store
	usage  *TokenUsage // nil: last_used_at is written on the request path
	log    *slog.Logger
	// groups is told SSO users' groups claims (WithGroupSync; nil: nobody).
	groups GroupSync
}

// IdentityOption configures an Identity.
type IdentityOption func(*Identity)

// WithTokenCache serves token look-ups from c while its change feed is current (see
// TokenCache); the gateway runs the feed (identitydb.Store.FollowAuthChanges) beside it.
func WithTokenCache(c *TokenCache) IdentityOption { return func(s *Identity) { s.cache = c } }

// WithTokenUsage records token uses in u, which writes last_used_at in batches
// (u.Run), instead of writing it on the request path.
func WithTokenUsage(u *TokenUsage) IdentityOption { return func(s *Identity) { s.usage = u } }

// WithHasher hashes and verifies the identity service's passwords with h, the one
// Hasher of the gateway (without it: a Hasher of the CPU count's slots, for tools
// such as shipctl).
func WithHasher(h *app.Hasher) IdentityOption { return func(s *Identity) { s.hasher = h } }

// WithLogger logs the identity service's warnings (a group sync that keeps the last
// admin's role) to log.
func WithLogger(log *slog.Logger) IdentityOption { return func(s *Identity) { s.log = log } }

// NewIdentity returns the identity service on store.
func NewIdentity(store IdentityStore, opts ...IdentityOption) *Identity {
	s := &Identity{store: store, now: time.Now, log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	if s.hasher == nil {
		s.hasher = app.NewHasher(0, 0)
	}
	return s
}

// Hasher is the password hasher of the identity service, shared with whatever else
// hashes passwords in this gateway.
func (s *Identity) Hasher() *app.Hasher { return s.hasher }

// Limits of identity fields.
const (
	MaxNameLen        = 100
	tokenPrefix       = "sf_"
	tokenRandomBytes  = 32
	tokenDisplayChars = 11
	// lastUsedResolution bounds how often a token's last_used_at is written on the
	// request path, by an Identity without a TokenUsage (shipctl).
	lastUsedResolution = time.Minute
)

// rawTokenPattern is the exact shape of a raw API token: sf_ + 43 base64url characters.
var rawTokenPattern = regexp.MustCompile(`^sf_[A-Za-z0-9_-]{43}$`)

// CreateUser validates and stores a new user. A duplicate e-mail (in any case) is a
// conflict.
func (s *Identity) CreateUser(ctx context.Context, in app.NewUser) (app.User, error) {
	in, hash, err := s.prepareUser(ctx, in)
	if err != nil {
		return app.User{}, err
	}
	return s.store.CreateUser(ctx, in, hash)
}

// prepareUser validates a new user, normalizes its e-mail and hashes its password.
func (s *Identity) prepareUser(ctx context.Context, in app.NewUser) (app.NewUser, string, error) {
	email, err := app.NormalizeEmail(in.Email)
	if err != nil {
		return in, "", err
	}
	in.Email = email
	if err := validateName(in.Name); err != nil {
		return in, "", err
	}
	if !in.Role.Valid() {
		return in, "", app.Invalid("role must be admin or regular")
	}
	var hash string
	if in.Password != "" {
		if err := app.ValidatePassword(in.Password); err != nil {
			return in, "", err
		}
		if hash, err = s.hasher.Hash(ctx, in.Password); err != nil {
			return in, "", err
		}
	}
	return in, hash, nil
}

// SetupFirstAdmin creates the first admin while no user exists; afterwards it answers
// not found, as the setup page disappears. Two racing submissions create one admin.
func (s *Identity) SetupFirstAdmin(ctx context.Context, in app.NewUser) (app.User, error) {
	n, err := s.store.CountUsers(ctx)
	if err != nil {
		return app.User{}, err
	}
	if n > 0 {
		return app.User{}, app.NotFound("setup")
	}
	if in.Password == "" {
		return app.User{}, app.Invalid("password is required")
	}
	in.Role = app.RoleAdmin
	in, hash, err := s.prepareUser(ctx, in)
	if err != nil {
		return app.User{}, err
	}
	return s.store.CreateFirstUser(ctx, in, hash)
}

// NeedsSetup reports whether no user exists yet.
func (s *Identity) NeedsSetup(ctx context.Context) (bool, error) {
	n, err := s.store.CountUsers(ctx)
	return n == 0, err
}

// UpdateUser applies a patch to a user, by: a role change is audited and e-mailed
// to the user.
func (s *Identity) UpdateUser(ctx context.Context, id int64, p app.UserPatch, by Actor) (app.User, error) {
	if p.Email != nil {
		email, err := app.NormalizeEmail(*p.Email)
		if err != nil {
			return app.User{}, err
		}
		p.Email = &email
	}
	if p.Name != nil {
		if err := validateName(*p.Name); err != nil {
			return app.User{}, err
		}
	}
	if p.Role != nil && !p.Role.Valid() {
		return app.User{}, app.Invalid("role must be admin or regular")
	}
	var hash *string
	if p.Password != nil {
		if err := app.ValidatePassword(*p.Password); err != nil {
			return app.User{}, err
		}
		h, err := s.hasher.Hash(ctx, *p.Password)
		if err != nil {
			return app.User{}, err
		}
		hash = &h
	}
	u, err := s.store.UpdateUser(ctx, id, p, hash, func(before, after app.User) AccountChange {
		if before.Role == after.Role {
			return AccountChange{}
		}
		return RoleChange(by, after, before.Role, "by the gateway")
	})
	if err != nil {
		return app.User{}, err
	}
	// This instance forgets the user's tokens at once; the others when the change
	// feed tells them.
	s.cache.Forget(AuthChange{Kind: AuthChangeUser, ID: id})
	// A new password or a disabled account ends the user's web sessions at once.
	if p.Password != nil || u.Disabled {
		if err := s.store.DeleteUserSessions(ctx, id); err != nil {
			return app.User{}, err
		}
	}
	return u, nil
}

// RemovesAdmin reports whether a patch would take an admin away if its user is one:
// it demotes to another role or disables the account.
func RemovesAdmin(p app.UserPatch) bool {
	return (p.Role != nil && *p.Role != app.RoleAdmin) || (p.Disabled != nil && *p.Disabled)
}

// CheckLastAdmin refuses (ErrConflict) to take away the admin target when it is the
// only one of activeAdmins, the ids of every active (enabled) admin.
func CheckLastAdmin(activeAdmins []int64, target int64) error {
	if len(activeAdmins) == 1 && activeAdmins[0] == target {
		return app.Conflict("the last active admin cannot be demoted or disabled")
	}
	return nil
}

// ListUsers returns every user, oldest first.
func (s *Identity) ListUsers(ctx context.Context) ([]app.User, error) { return s.store.ListUsers(ctx) }

// User returns the user with that id (app.ErrNotFound when none).
func (s *Identity) User(ctx context.Context, id int64) (app.User, error) {
	return s.store.GetUser(ctx, id)
}

// UserByEmail finds a user by e-mail address, in any case.
func (s *Identity) UserByEmail(ctx context.Context, email string) (app.User, error) {
	return s.store.GetUserByEmail(ctx, email)
}

// CheckPassword returns the user with that e-mail and password, for the web UI's login.
// Unknown users, wrong passwords, disabled users and users without a password all
// fail the same way, after the same work: one argon2id verification (against a dummy
// hash when there is no real one to check), so timing does not tell them apart.
func (s *Identity) CheckPassword(ctx context.Context, email, password string) (app.User, error) {
	var (
		u   app.User
		err error = app.ErrNotFound
	)
	// No user has an address longer than app.MaxEmailLen: such an address is not looked
	// up (it still costs the same verification below).
	if len(strings.TrimSpace(email)) <= app.MaxEmailLen {
		u, err = s.store.GetUserByEmail(ctx, email)
	}
	if err != nil && !errors.Is(err, app.ErrNotFound) {
		return app.User{}, err
	}
	usable := err == nil && !u.Disabled && u.PasswordHash != ""
	hash := app.DummyHash
	if usable {
		hash = u.PasswordHash
	}
	ok, verr := s.hasher.Verify(ctx, hash, password)
	if verr != nil {
		return app.User{}, verr
	}
	if !usable || !ok {
		return app.User{}, app.ErrUnauthenticated
	}
	return u, nil
}

// CreateToken mints an API token for the user and returns its record with the raw
// value, which is never available again. The audit log records it, by by.
func (s *Identity) CreateToken(ctx context.Context, userID int64, name string, expiresAt *time.Time, by Actor) (app.Token, string, error) {
	if err := validateName(name); err != nil {
		return app.Token{}, "", err
	}
	if expiresAt != nil && !expiresAt.After(s.now()) {
		return app.Token{}, "", app.Invalid("expires_at must be in the future")
	}
	raw, err := newRawToken()
	if err != nil {
		return app.Token{}, "", err
	}
	sum := sha256.Sum256([]byte(raw))
	prefix := raw[:tokenDisplayChars]
	t, err := s.store.CreateToken(ctx, app.NewToken{
		UserID:    userID,
		Name:      name,
		Prefix:    prefix,
		Hash:      sum[:],
		ExpiresAt: expiresAt,
	}, AccountChange{Audit: []app.AuditEntry{by.Audit(ActionTokenCreate, fmt.Sprintf("user %d: token %s… %q", userID, prefix, name))}})
	if err != nil {
		return app.Token{}, "", err
	}
	return t, raw, nil
}

// TokenExpiryWithin is the expiry of a token created with a token that expires at
// parent (nil: never): the expiry asked for, but no later than parent's, so a token
// that expires cannot mint one that outlives it (docs/API.md, "Hostile clients", token
// lifetime). A token asked for without an expiry gets parent's.
func TokenExpiryWithin(requested, parent *time.Time) *time.Time {
	if parent == nil || (requested != nil && !requested.After(*parent)) {
		return requested
	}
	p := *parent
	return &p
}

// ListTokens returns the user's tokens, newest first. A use this instance has not
// written yet shows in last_used_at all the same.
func (s *Identity) ListTokens(ctx context.Context, userID int64) ([]app.Token, error) {
	tokens, err := s.store.ListTokens(ctx, userID)
	if err != nil || s.usage == nil {
		return tokens, err
	}
	for i, t := range tokens {
		if at, ok := s.usage.lastUse(t.ID); ok && (t.LastUsedAt == nil || at.After(*t.LastUsedAt)) {
			tokens[i].LastUsedAt = &at
		}
	}
	return tokens, nil
}

// RevokeToken deletes one of the user's tokens (another user's token is not found);
// the audit log records it, by by.
func (s *Identity) RevokeToken(ctx context.Context, userID, id int64, by Actor) error {
	ch := AccountChange{Audit: []app.AuditEntry{by.Audit(ActionTokenRevoke, fmt.Sprintf("user %d: token %d", userID, id))}}
	if err := s.store.DeleteToken(ctx, userID, id, ch); err != nil {
		return err
	}
	s.cache.Forget(AuthChange{Kind: AuthChangeToken, ID: id})
	return nil
}

// Authenticate resolves a raw bearer token to its user and token id. Malformed,
// unknown, expired and revoked tokens, and tokens of disabled users, are all
// ErrUnauthenticated.
func (s *Identity) Authenticate(ctx context.Context, raw string) (app.User, int64, error) {
	owner, err := s.AuthenticateToken(ctx, raw)
	if err != nil {
		return app.User{}, 0, err
	}
	return owner.User, owner.TokenID, nil
}

// AuthenticateToken is Authenticate returning the whole TokenOwner: the token's
// expiry too.
func (s *Identity) AuthenticateToken(ctx context.Context, raw string) (app.TokenOwner, error) {
	if !rawTokenPattern.MatchString(raw) {
		return app.TokenOwner{}, app.ErrUnauthenticated
	}
	sum := sha256.Sum256([]byte(raw))
	now := s.now()
	owner, gen, cached := s.cache.get(sum, now)
	if !cached {
		var err error
		owner, err = s.store.TokenOwner(ctx, sum[:])
		if errors.Is(err, app.ErrNotFound) {
			return app.TokenOwner{}, app.ErrUnauthenticated
		}
		if err != nil {
			return app.TokenOwner{}, err
		}
	}
	// Expiry is checked at every use, cached or not.
	if owner.ExpiresAt != nil && !now.Before(*owner.ExpiresAt) {
		return app.TokenOwner{}, app.ErrUnauthenticated
	}
	if owner.User.Disabled {
		return app.TokenOwner{}, app.ErrUnauthenticated
	}
	if !cached {
		s.cache.put(sum, owner, gen, s.now())
	}
	if s.usage != nil {
		s.usage.Record(owner.TokenID, now)
	} else if owner.LastUsedAt == nil || now.Sub(*owner.LastUsedAt) >= lastUsedResolution {
		if err := s.store.TouchTokens(ctx, []TokenUse{{TokenID: owner.TokenID, At: now}}); err != nil {
			return app.TokenOwner{}, err
		}
	}
	return owner, nil
}

func newRawToken() (string, error) {
	b := make([]byte, tokenRandomBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

func validateName(name string) error {
	n := utf8.RuneCountInString(name)
	if strings.TrimSpace(name) == "" || n > MaxNameLen {
		return app.Invalid("name must be 1 to %d characters", MaxNameLen)
	}
	if strings.ContainsFunc(name, app.IsControl) {
		return app.Invalid("name must not contain control characters")
	}
	return nil
}

// ValidEmail reports whether s is a bare e-mail address.
func ValidEmail(s string) bool {
	_, err := app.NormalizeEmail(s)
	return err == nil
}
