// Package store implements the gateway's persistence of users, tokens, packages,
// sessions, OpenID sign-ins and encryption keys on PostgreSQL, and its objects on S3.
// The SQL lives in queries.sql and the other *.sql files beside it and is compiled by
// sqlc (make generate) into the *.gen.go files; the Go files adapt the generated code
// to the app packages' types and errors. The other domains' stores are the <domain>db
// packages under this directory; what they all share is sqldb.
package store

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// Postgres is the gateway's store on a pgx pool: users, tokens, packages and their
// files, recipients and links, sessions, OpenID sign-ins, encryption keys. The domains
// with a store of their own (policies, audit, webhook administration, previews,
// resumable uploads) are in the <domain>db packages beside it; every store writes its
// changes' effects through one sqldb.DB.
type Postgres struct {
	pool *pgxpool.Pool
	q    *Queries
	// sql runs the transactions that write effects and wakes the outbox relay.
	sql *sqldb.DB
	// creates shares round trips and commits between concurrent package creations.
	creates *groupCommit
}

var _ identity.IdentityStore = (*Postgres)(nil)

// Option configures a Postgres store.
type Option func(*Postgres)

// WithDB has the store write effects through d (its outbox wake-up and sealer), the
// DB every other store of the gateway shares. Without it the store has a DB of its
// own on its pool, which wakes nothing and seals nothing.
func WithDB(d *sqldb.DB) Option { return func(s *Postgres) { s.sql = d } }

// WithRegisterer registers the store's metrics with reg: how many package creations
// share a round trip and a commit.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(s *Postgres) { reg.MustRegister(s.creates.rounds, s.creates.creations) }
}

// NewPostgres returns the store on pool.
func NewPostgres(pool *pgxpool.Pool, opts ...Option) *Postgres {
	s := &Postgres{pool: pool, q: New(pool), creates: newGroupCommit(pool)}
	for _, o := range opts {
		o(s)
	}
	if s.sql == nil {
		s.sql = sqldb.NewDB(pool)
	}
	return s
}

// Close stops the runners of the package creations' group commits once the rounds
// under way are done; a creation after Close fails (groupcommit.ErrClosed).
func (s *Postgres) Close() { s.creates.c.Close() }

// CreateUser inserts a user; a duplicate e-mail is a conflict.
func (s *Postgres) CreateUser(ctx context.Context, u app.NewUser, passwordHash string) (app.User, error) {
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
func (s *Postgres) CreateFirstUser(ctx context.Context, u app.NewUser, passwordHash string) (app.User, error) {
	var user app.User
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
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
func (s *Postgres) GetUser(ctx context.Context, id int64) (app.User, error) {
	row, err := s.q.GetUser(ctx, id)
	if err != nil {
		return app.User{}, mapUserErr(err)
	}
	return toUser(row), nil
}

// GetUserByEmail returns the user with that e-mail, in any case.
func (s *Postgres) GetUserByEmail(ctx context.Context, email string) (app.User, error) {
	row, err := s.q.GetUserByEmail(ctx, email)
	if err != nil {
		return app.User{}, mapUserErr(err)
	}
	return toUser(row), nil
}

// ListUsers returns every user, oldest first.
func (s *Postgres) ListUsers(ctx context.Context) ([]app.User, error) {
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
func (s *Postgres) CountUsers(ctx context.Context) (int64, error) { return s.q.CountUsers(ctx) }

// UpdateUser applies the non-nil fields of p and writes change(the user before,
// after) in the same transaction. A patch that demotes or disables an active admin
// first locks every active admin's row, so two such patches run one after the other
// and the last active admin is never taken away (ErrConflict).
func (s *Postgres) UpdateUser(ctx context.Context, id int64, p app.UserPatch, passwordHash *string, change func(before, after app.User) identity.AccountChange) (app.User, error) {
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
func (s *Postgres) CreateToken(ctx context.Context, t app.NewToken, ch identity.AccountChange) (app.Token, error) {
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
func (s *Postgres) ListTokens(ctx context.Context, userID int64) ([]app.Token, error) {
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
func (s *Postgres) DeleteToken(ctx context.Context, userID, id int64, ch identity.AccountChange) error {
	return s.inAccountTx(ctx, func(q *Queries) (identity.AccountChange, error) {
		n, err := q.DeleteToken(ctx, DeleteTokenParams{ID: id, UserID: userID})
		if err == nil && n == 0 {
			err = app.NotFound("token")
		}
		return ch, err
	})
}

// TokenOwner resolves a token hash to the token and its user.
func (s *Postgres) TokenOwner(ctx context.Context, hash []byte) (app.TokenOwner, error) {
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
func (s *Postgres) TouchTokens(ctx context.Context, uses []identity.TokenUse) error {
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
