package identity

import (
	"context"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Start signs a user in whom someone else vouched for (the OpenID provider): a new
// session, with the same lifetime as a password sign-in's. It returns the raw id
// for the cookie.
func (s *Sessions) Start(ctx context.Context, u app.User) (string, error) {
	if u.Disabled {
		return "", app.ErrUnauthenticated
	}
	now := s.now()
	raw, hash, err := newSessionID()
	if err != nil {
		return "", err
	}
	sess := Session{IDHash: hash, UserID: u.ID, CreatedAt: now, LastSeenAt: now, ExpiresAt: s.expiry(now, now)}
	if err := s.store.CreateSession(ctx, sess); err != nil {
		return "", err
	}
	_ = s.store.DeleteExpiredSessions(ctx, now)
	return raw, nil
}
