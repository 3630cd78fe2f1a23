package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

var _ app.SessionStore = (*Postgres)(nil)

// CreateSession stores a new web session.
func (s *Postgres) CreateSession(ctx context.Context, sess app.Session) error {
	return s.q.InsertSession(ctx, InsertSessionParams{
		IDHash: sess.IDHash, UserID: sess.UserID, CreatedAt: sess.CreatedAt, LastSeenAt: sess.LastSeenAt, ExpiresAt: sess.ExpiresAt,
	})
}

// SessionUser returns the session with that id hash and its user.
func (s *Postgres) SessionUser(ctx context.Context, idHash []byte) (app.Session, app.User, error) {
	row, err := s.q.SessionUser(ctx, idHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.Session{}, app.User{}, app.NotFound("session")
	}
	if err != nil {
		return app.Session{}, app.User{}, err
	}
	w := row.WebSession
	return app.Session{IDHash: w.IDHash, UserID: w.UserID, CreatedAt: w.CreatedAt, LastSeenAt: w.LastSeenAt, ExpiresAt: w.ExpiresAt},
		toUser(row.User), nil
}

// TouchSession records a session's last use and its new end.
func (s *Postgres) TouchSession(ctx context.Context, idHash []byte, lastSeen, expiresAt time.Time) error {
	return s.q.TouchSession(ctx, TouchSessionParams{IDHash: idHash, LastSeenAt: lastSeen, ExpiresAt: expiresAt})
}

// DeleteSession ends one session.
func (s *Postgres) DeleteSession(ctx context.Context, idHash []byte) error {
	return s.q.DeleteSession(ctx, idHash)
}

// DeleteUserSessions ends every session of a user.
func (s *Postgres) DeleteUserSessions(ctx context.Context, userID int64) error {
	return s.q.DeleteUserSessions(ctx, userID)
}

// DeleteExpiredSessions removes the sessions that ended before now.
func (s *Postgres) DeleteExpiredSessions(ctx context.Context, now time.Time) error {
	return s.q.DeleteExpiredSessions(ctx, now)
}

// LoginLockedUntil returns the latest sign-in lock in force on any of keys, nil when
// there is none.
func (s *Postgres) LoginLockedUntil(ctx context.Context, keys []string, now time.Time) (*time.Time, error) {
	rows, err := s.q.LoginLockedUntil(ctx, LoginLockedUntilParams{Keys: keys, Now: &now})
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return rows[0], nil
}

// RecordLoginFailure counts a failed sign-in of key.
func (s *Postgres) RecordLoginFailure(ctx context.Context, key string, now, windowStart, lockUntil time.Time, maxFailures int) error {
	return s.q.RecordLoginFailure(ctx, RecordLoginFailureParams{
		Key: key, Now: now, MaxFailures: int32(maxFailures), LockUntil: lockUntil, WindowStart: windowStart,
	})
}

// DeleteStaleLoginFailures forgets the counts whose window began before windowStart
// and whose lock, if any, is over.
func (s *Postgres) DeleteStaleLoginFailures(ctx context.Context, now, windowStart time.Time) error {
	return s.q.DeleteStaleLoginFailures(ctx, DeleteStaleLoginFailuresParams{Now: &now, WindowStart: windowStart})
}

// ClearLoginFailures forgets the failed sign-ins of key.
func (s *Postgres) ClearLoginFailures(ctx context.Context, key string) error {
	return s.q.ClearLoginFailures(ctx, key)
}
