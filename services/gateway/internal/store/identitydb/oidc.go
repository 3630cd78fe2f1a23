package identitydb

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

var _ identity.OIDCStore = (*Store)(nil)

// GetUserByOIDC returns the user linked to (issuer, subject).
func (s *Store) GetUserByOIDC(ctx context.Context, issuer, subject string) (app.User, error) {
	r, err := s.q.GetUserByOIDC(ctx, GetUserByOIDCParams{Issuer: issuer, Subject: subject})
	if err != nil {
		return app.User{}, mapUserErr(err)
	}
	return toUser(r), nil
}

// LinkUserOIDC links a user without an identity to (issuer, subject) and writes ch
// in the same transaction.
func (s *Store) LinkUserOIDC(ctx context.Context, id int64, issuer, subject string, ch identity.AccountChange) (app.User, error) {
	var u app.User
	err := s.inAccountTx(ctx, func(q *Queries) (identity.AccountChange, error) {
		r, err := q.LinkUserOIDC(ctx, LinkUserOIDCParams{ID: id, Issuer: issuer, Subject: subject})
		if errors.Is(err, pgx.ErrNoRows) || isUnique(err) {
			return ch, app.Conflict("the user is linked to another identity")
		}
		u = toUser(r)
		return ch, err
	})
	return u, err
}

// CreateOIDCUser creates a user without a password, linked to (issuer, subject).
func (s *Store) CreateOIDCUser(ctx context.Context, u app.NewUser, issuer, subject string) (app.User, error) {
	r, err := s.q.CreateOIDCUser(ctx, CreateOIDCUserParams{Email: u.Email, Name: u.Name, Role: string(u.Role), Issuer: issuer, Subject: subject})
	if err != nil {
		return app.User{}, mapUserErr(err)
	}
	return toUser(r), nil
}

// SetUserRole sets a user's role and writes change(the user after) in the same
// transaction. A demotion first locks every active admin's row, so the last one is
// never demoted (ErrConflict), however many demotions run at once.
func (s *Store) SetUserRole(ctx context.Context, id int64, role app.Role, change func(after app.User) identity.AccountChange) (app.User, error) {
	var u app.User
	err := s.inAccountTx(ctx, func(q *Queries) (identity.AccountChange, error) {
		if role != app.RoleAdmin {
			admins, err := q.LockActiveAdmins(ctx)
			if err != nil {
				return identity.AccountChange{}, err
			}
			if err := identity.CheckLastAdmin(admins, id); err != nil {
				return identity.AccountChange{}, err
			}
		}
		r, err := q.SetUserRole(ctx, SetUserRoleParams{ID: id, Role: string(role)})
		if err != nil {
			return identity.AccountChange{}, mapUserErr(err)
		}
		u = toUser(r)
		return change(u), nil
	})
	return u, err
}

// InsertOIDCLogin stores a sign-in under way.
func (s *Store) InsertOIDCLogin(ctx context.Context, l identity.OIDCLogin) error {
	arg := InsertOIDCLoginParams{StateHash: l.StateHash, Nonce: l.Nonce, Verifier: l.Verifier, Next: l.Next, CreatedAt: l.CreatedAt}
	if l.LinkUserID != 0 {
		arg.LinkUserID = &l.LinkUserID
	}
	return s.q.InsertOIDCLogin(ctx, arg)
}

// TakeOIDCLogin removes and returns the sign-in with that state hash.
func (s *Store) TakeOIDCLogin(ctx context.Context, stateHash []byte) (identity.OIDCLogin, error) {
	r, err := s.q.TakeOIDCLogin(ctx, stateHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return identity.OIDCLogin{}, app.NotFound("sign-in")
	}
	if err != nil {
		return identity.OIDCLogin{}, err
	}
	l := identity.OIDCLogin{StateHash: r.StateHash, Nonce: r.Nonce, Verifier: r.Verifier, Next: r.Next, CreatedAt: r.CreatedAt}
	if r.LinkUserID != nil {
		l.LinkUserID = *r.LinkUserID
	}
	return l, nil
}

// DeleteStaleOIDCLogins forgets the sign-ins begun before before.
func (s *Store) DeleteStaleOIDCLogins(ctx context.Context, before time.Time) error {
	return s.q.DeleteStaleOIDCLogins(ctx, before)
}

func isUnique(err error) bool { return sqldb.IsCode(err, sqldb.UniqueViolation) }
