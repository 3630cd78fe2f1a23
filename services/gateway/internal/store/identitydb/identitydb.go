// Package identitydb is the identity domain's store on PostgreSQL (identity's
// IdentityStore, SessionStore, OIDCStore and RecheckStore): users and their API tokens,
// web sessions and the login throttle, sign-ins through the OpenID provider and the
// identities linked to users, the accounts' audit entries and notices written in the
// transaction of their change, and the feed of changes to users and tokens that keeps
// the token cache current (authfeed.go). Its SQL is queries.sql, compiled by sqlc.
package identitydb

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// Store implements the identity domain's stores.
type Store struct {
	sql *sqldb.DB
	q   *Queries
}

var _ identity.IdentityStore = (*Store)(nil)

// NewStore returns the store on d's pool.
func NewStore(d *sqldb.DB) *Store { return &Store{sql: d, q: New(d.Pool)} }

// CreateUser inserts a user; a duplicate e-mail is a conflict.
func (s *Store) CreateUser(ctx context.Context, u app.NewUser, passwordHash string) (app.User, error) {
	row, err := s.q.CreateUser(ctx, CreateUserParams{
		Email: u.Email, Name: u.Name, Role: string(u.Role), PasswordHash: nonEmpty(passwordHash),
	})
	if err != nil {
		return app.User{}, mapUserErr(err)
	}
	return toUser(row), nil
}

// setupLockKey serialises first-user creation across gateway instances.
const setupLockKey = 0x5e7a9f1e

// CreateFirstUser creates the user only while the users table is empty. A transaction
// advisory lock makes the check and the insert one step, so two racing setups create
// one user; the loser gets ErrNotFound, as the setup page is gone.
func (s *Store) CreateFirstUser(ctx context.Context, u app.NewUser, passwordHash string) (app.User, error) {
	var user app.User
	err := pgx.BeginFunc(ctx, s.sql.Pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.LockSetup(ctx, setupLockKey); err != nil {
			return err
		}
		n, err := q.CountUsers(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			return app.NotFound("setup")
		}
		row, err := q.CreateUser(ctx, CreateUserParams{
			Email: u.Email, Name: u.Name, Role: string(u.Role), PasswordHash: nonEmpty(passwordHash),
		})
		if err != nil {
			return mapUserErr(err)
		}
		user = toUser(row)
		return nil
	})
	return user, err
}

// GetUser returns the user with that id.
func (s *Store) GetUser(ctx context.Context, id int64) (app.User, error) {
	row, err := s.q.GetUser(ctx, id)
	if err != nil {
		return app.User{}, mapUserErr(err)
	}
	return toUser(row), nil
}

// GetUserByEmail returns the user with that e-mail, in any case.
func (s *Store) GetUserByEmail(ctx context.Context, email string) (app.User, error) {
	row, err := s.q.GetUserByEmail(ctx, email)
	if err != nil {
		return app.User{}, mapUserErr(err)
	}
	return toUser(row), nil
}

// ListUsers returns every user, oldest first.
func (s *Store) ListUsers(ctx context.Context) ([]app.User, error) {
	rows, err := s.q.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]app.User, len(rows))
	for i, r := range rows {
		out[i] = toUser(r)
	}
	return out, nil
}

// CountUsers returns how many users exist.
func (s *Store) CountUsers(ctx context.Context) (int64, error) { return s.q.CountUsers(ctx) }

// SetUserLanguage sets the user's language, or clears it (nil).
func (s *Store) SetUserLanguage(ctx context.Context, id int64, language *string) (app.User, error) {
	row, err := s.q.SetUserLanguage(ctx, SetUserLanguageParams{ID: id, Language: language})
	if err != nil {
		return app.User{}, mapUserErr(err)
	}
	return toUser(row), nil
}

// UpdateUser applies the non-nil fields of p and writes change(the user before,
// after) in the same transaction. A patch that demotes or disables an active admin
// first locks every active admin's row, so two such patches run one after the other
// and the last active admin is never taken away (ErrConflict).
func (s *Store) UpdateUser(ctx context.Context, id int64, p app.UserPatch, passwordHash *string, change func(before, after app.User) identity.AccountChange) (app.User, error) {
	var role *string
	if p.Role != nil {
		r := string(*p.Role)
		role = &r
	}
	params := UpdateUserParams{
		ID: id, Email: p.Email, Name: p.Name, Role: role, Disabled: p.Disabled, PasswordHash: passwordHash,
	}
	var user app.User
	err := s.inAccountTx(ctx, func(q *Queries) (identity.AccountChange, error) {
		if identity.RemovesAdmin(p) {
			admins, err := q.LockActiveAdmins(ctx)
			if err != nil {
				return identity.AccountChange{}, err
			}
			if err := identity.CheckLastAdmin(admins, id); err != nil {
				return identity.AccountChange{}, err
			}
		}
		before, err := q.GetUserForUpdate(ctx, id)
		if err != nil {
			return identity.AccountChange{}, mapUserErr(err)
		}
		row, err := q.UpdateUser(ctx, params)
		if err != nil {
			return identity.AccountChange{}, mapUserErr(err)
		}
		user = toUser(row)
		return change(toUser(before), user), nil
	})
	return user, err
}

// CreateToken stores a token's hash and display prefix and writes ch in the same
// transaction.
func (s *Store) CreateToken(ctx context.Context, t app.NewToken, ch identity.AccountChange) (app.Token, error) {
	var tok app.Token
	err := s.inAccountTx(ctx, func(q *Queries) (identity.AccountChange, error) {
		row, err := q.CreateToken(ctx, CreateTokenParams{
			UserID: t.UserID, Name: t.Name, Prefix: t.Prefix, TokenHash: t.Hash, ExpiresAt: t.ExpiresAt,
		})
		tok = toToken(ListTokensRow(row))
		return ch, err
	})
	if err != nil {
		return app.Token{}, err
	}
	return tok, nil
}

// ListTokens returns the user's tokens, newest first.
func (s *Store) ListTokens(ctx context.Context, userID int64) ([]app.Token, error) {
	rows, err := s.q.ListTokens(ctx, userID)
	if err != nil {
		return nil, err
	}
	out := make([]app.Token, len(rows))
	for i, r := range rows {
		out[i] = toToken(r)
	}
	return out, nil
}

// DeleteToken removes one of the user's tokens and writes ch in the same transaction.
func (s *Store) DeleteToken(ctx context.Context, userID, id int64, ch identity.AccountChange) error {
	return s.inAccountTx(ctx, func(q *Queries) (identity.AccountChange, error) {
		n, err := q.DeleteToken(ctx, DeleteTokenParams{ID: id, UserID: userID})
		if err == nil && n == 0 {
			err = app.NotFound("token")
		}
		return ch, err
	})
}

// TokenOwner resolves a token hash to the token and its user.
func (s *Store) TokenOwner(ctx context.Context, hash []byte) (app.TokenOwner, error) {
	row, err := s.q.TokenOwner(ctx, hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.TokenOwner{}, app.NotFound("token")
	}
	if err != nil {
		return app.TokenOwner{}, err
	}
	return app.TokenOwner{TokenID: row.TokenID, ExpiresAt: row.ExpiresAt, LastUsedAt: row.LastUsedAt, User: toUser(row.User)}, nil
}

// TouchTokens writes tokens' last uses in one statement, in id order (so two gateways
// writing overlapping batches lock the rows in the same order), never moving a
// last_used_at back.
func (s *Store) TouchTokens(ctx context.Context, uses []identity.TokenUse) error {
	if len(uses) == 0 {
		return nil
	}
	uses = slices.Clone(uses)
	slices.SortFunc(uses, func(a, b identity.TokenUse) int { return cmp.Compare(a.TokenID, b.TokenID) })
	p := TouchTokensParams{Ids: make([]int64, len(uses)), Ats: make([]time.Time, len(uses))}
	for i, u := range uses {
		p.Ids[i], p.Ats[i] = u.TokenID, u.At
	}
	return s.q.TouchTokens(ctx, p)
}

func mapUserErr(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return app.NotFound("user")
	}
	if sqldb.IsCode(err, sqldb.UniqueViolation) {
		return app.Conflict("a user with that email already exists")
	}
	return err
}

func toUser(r User) app.User {
	u := app.User{ID: r.ID, Email: r.Email, Name: r.Name, Role: app.Role(r.Role), Disabled: r.Disabled, CreatedAt: r.CreatedAt}
	if r.PasswordHash != nil {
		u.PasswordHash = *r.PasswordHash
	}
	if r.OidcIssuer != nil && r.OidcSubject != nil {
		u.OIDCIssuer, u.OIDCSubject = *r.OidcIssuer, *r.OidcSubject
	}
	if r.Language != nil {
		u.Language = *r.Language
	}
	return u
}

func toToken(r ListTokensRow) app.Token {
	return app.Token{
		ID: r.ID, UserID: r.UserID, Name: r.Name, Prefix: r.Prefix,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, LastUsedAt: r.LastUsedAt,
	}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
