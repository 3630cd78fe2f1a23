package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
)

var _ identity.OIDCStore = (*Postgres)(nil)

// GetUserByOIDC returns the user linked to (issuer, subject).
func (s *Postgres) GetUserByOIDC(ctx context.Context, issuer, subject string) (app.User, error) {
	r, err := s.q.GetUserByOIDC(ctx, GetUserByOIDCParams{Issuer: issuer, Subject: subject})
	if err != nil {
		return app.User{}, mapUserErr(err)
	}
	return toUser(r), nil
}

// LinkUserOIDC links a user without an identity to (issuer, subject).
func (s *Postgres) LinkUserOIDC(ctx context.Context, id int64, issuer, subject string) (app.User, error) {
	r, err := s.q.LinkUserOIDC(ctx, LinkUserOIDCParams{ID: id, Issuer: issuer, Subject: subject})
	if errors.Is(err, pgx.ErrNoRows) || isUnique(err) {
		return app.User{}, app.Conflict("the user is linked to another identity")
	}
	if err != nil {
		return app.User{}, err
	}
	return toUser(r), nil
}

// CreateOIDCUser creates a user without a password, linked to (issuer, subject).
func (s *Postgres) CreateOIDCUser(ctx context.Context, u app.NewUser, issuer, subject string) (app.User, error) {
	r, err := s.q.CreateOIDCUser(ctx, CreateOIDCUserParams{Email: u.Email, Name: u.Name, Role: string(u.Role), Issuer: issuer, Subject: subject})
	if err != nil {
		return app.User{}, mapUserErr(err)
	}
	return toUser(r), nil
}

// SetUserRole sets a user's role.
func (s *Postgres) SetUserRole(ctx context.Context, id int64, role app.Role) (app.User, error) {
	r, err := s.q.SetUserRole(ctx, SetUserRoleParams{ID: id, Role: string(role)})
	if err != nil {
		return app.User{}, mapUserErr(err)
	}
	return toUser(r), nil
}

// InsertOIDCLogin stores a sign-in under way.
func (s *Postgres) InsertOIDCLogin(ctx context.Context, l identity.OIDCLogin) error {
	return s.q.InsertOIDCLogin(ctx, InsertOIDCLoginParams{StateHash: l.StateHash, Nonce: l.Nonce, Verifier: l.Verifier, Next: l.Next, CreatedAt: l.CreatedAt})
}

// TakeOIDCLogin removes and returns the sign-in with that state hash.
func (s *Postgres) TakeOIDCLogin(ctx context.Context, stateHash []byte) (identity.OIDCLogin, error) {
	r, err := s.q.TakeOIDCLogin(ctx, stateHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return identity.OIDCLogin{}, app.NotFound("sign-in")
	}
	if err != nil {
		return identity.OIDCLogin{}, err
	}
	return identity.OIDCLogin{StateHash: r.StateHash, Nonce: r.Nonce, Verifier: r.Verifier, Next: r.Next, CreatedAt: r.CreatedAt}, nil
}

// DeleteStaleOIDCLogins forgets the sign-ins begun before before.
func (s *Postgres) DeleteStaleOIDCLogins(ctx context.Context, before time.Time) error {
	return s.q.DeleteStaleOIDCLogins(ctx, before)
}

func isUnique(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgUniqueViolation
}
