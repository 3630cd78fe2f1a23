package identitydb

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
)

var _ identity.SessionStore = (*Store)(nil)

// CreateSession stores a new web session and writes ch in the same transaction.
func (s *Store) CreateSession(ctx context.Context, sess identity.Session, ch identity.AccountChange) error {
	arg := InsertSessionParams{
		IDHash: sess.IDHash, UserID: sess.UserID, CreatedAt: sess.CreatedAt, LastSeenAt: sess.LastSeenAt, ExpiresAt: sess.ExpiresAt,
	}
	if o := sess.OIDC; o != nil {
		checkAt := o.CheckAt
		arg.OidcIssuer, arg.OidcSubject, arg.OidcRefresh, arg.OidcCheckAt = &o.Issuer, &o.Subject, nonEmpty(o.SealedRefresh), &checkAt
	}
	return s.inAccountTx(ctx, func(q *Queries) (identity.AccountChange, error) {
		return ch, q.InsertSession(ctx, arg)
	})
}

// SessionUser returns the session with that id hash and its user.
func (s *Store) SessionUser(ctx context.Context, idHash []byte) (identity.Session, app.User, error) {
	row, err := s.q.SessionUser(ctx, idHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return identity.Session{}, app.User{}, app.NotFound("session")
	}
	if err != nil {
		return identity.Session{}, app.User{}, err
	}
	return toSession(row.WebSession), toUser(row.User), nil
}

// TouchSession records a session's last use and its new end.
func (s *Store) TouchSession(ctx context.Context, idHash []byte, lastSeen, expiresAt time.Time) error {
	return s.q.TouchSession(ctx, TouchSessionParams{IDHash: idHash, LastSeenAt: lastSeen, ExpiresAt: expiresAt})
}

// DeleteSession ends one session and, when there was one, writes ch in the same
// transaction.
func (s *Store) DeleteSession(ctx context.Context, idHash []byte, ch identity.AccountChange) error {
	return s.inAccountTx(ctx, func(q *Queries) (identity.AccountChange, error) {
		n, err := q.DeleteSession(ctx, idHash)
		if n == 0 {
			return identity.AccountChange{}, err
		}
		return ch, err
	})
}

// DeleteUserSessions ends every session of a user.
func (s *Store) DeleteUserSessions(ctx context.Context, userID int64) error {
	return s.q.DeleteUserSessions(ctx, userID)
}

// DeleteExpiredSessions removes the sessions that ended before now.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) error {
	return s.q.DeleteExpiredSessions(ctx, now)
}

// DeleteStaleLoginFailures forgets the counts whose window began before windowStart
// and whose lock, if any, is over.
func (s *Store) DeleteStaleLoginFailures(ctx context.Context, now, windowStart time.Time) error {
	return s.q.DeleteStaleLoginFailures(ctx, DeleteStaleLoginFailuresParams{Now: &now, WindowStart: windowStart})
}

// ClearLoginFailures forgets the failed sign-ins of key.
func (s *Store) ClearLoginFailures(ctx context.Context, key string) error {
	return s.q.ClearLoginFailures(ctx, key)
}

// CountLoginAttempt counts a sign-in attempt as a failure of every key before its
// password is checked; see identity.SessionStore.
func (s *Store) CountLoginAttempt(ctx context.Context, keys []string, now, windowStart, lockUntil time.Time, maxFailures int) (identity.LoginCount, error) {
	r, err := s.q.CountLoginAttempt(ctx, CountLoginAttemptParams{
		Keys: keys, Now: now, WindowStart: windowStart, LockUntil: lockUntil, MaxFailures: int32(maxFailures),
	})
	if err != nil {
		return identity.LoginCount{}, err
	}
	return identity.LoginCount{Failures: int(r.Failures), LockedUntil: r.LockedUntil}, nil
}

// RefundLoginAttempt takes back one counted attempt of key, lifting the lock when
// the count falls below maxFailures again; a count that falls to zero is forgotten.
func (s *Store) RefundLoginAttempt(ctx context.Context, key string, maxFailures int) error {
	return s.q.RefundLoginAttempt(ctx, RefundLoginAttemptParams{Key: key, MaxFailures: int32(maxFailures)})
}
