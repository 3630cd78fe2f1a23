package identity

import (
	"context"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Sealer encrypts secrets for storage (secretbox.Keyring): the provider's refresh
// tokens.
type Sealer interface {
	Seal(plaintext string) (string, error)
	Open(sealed string) (string, error)
}

// SessionsOption configures Sessions.
type SessionsOption func(*Sessions)

// WithOIDCRecheck has sessions begun through the OpenID provider keep its refresh
// token sealed with sealer, to be checked again every interval (OIDCRecheck).
func WithOIDCRecheck(sealer Sealer, interval time.Duration) SessionsOption {
	return func(s *Sessions) { s.sealer, s.recheck = sealer, interval }
}

// OIDCSignIn is what a sign-in through the OpenID provider gives a session: the
// identity and the provider's refresh token ("" when it gave none).
type OIDCSignIn struct {
	Issuer, Subject string
	RefreshToken    string
}

// Start signs a user in whom the OpenID provider vouched for: a new session, with the
// same lifetime as a password sign-in's, that keeps the identity and the refresh
// token (sealed) for the rechecks, with its audit entry. It returns the raw id for
// the cookie.
func (s *Sessions) Start(ctx context.Context, u app.User, in OIDCSignIn, client app.Client) (string, error) {
	if u.Disabled {
		return "", app.ErrUnauthenticated
	}
	now := s.now()
	raw, hash, err := newSessionID()
	if err != nil {
		return "", err
	}
	o := &SessionOIDC{Issuer: in.Issuer, Subject: in.Subject, CheckAt: now.Add(s.recheckEvery())}
	if in.RefreshToken != "" && s.sealer != nil {
		if o.SealedRefresh, err = s.sealer.Seal(in.RefreshToken); err != nil {
			return "", err
		}
	}
	sess := Session{IDHash: hash, UserID: u.ID, CreatedAt: now, LastSeenAt: now, ExpiresAt: s.expiry(now, now), OIDC: o}
	signIn := AccountChange{Audit: []app.AuditEntry{UserActor(u, client).Audit(ActionSignIn, "sso")}}
	if err := s.store.CreateSession(ctx, sess, signIn); err != nil {
		return "", err
	}
	_ = s.store.DeleteExpiredSessions(ctx, now)
	return raw, nil
}

// recheckEvery is how often a session begun through the provider is checked again.
func (s *Sessions) recheckEvery() time.Duration {
	if s.recheck > 0 {
		return s.recheck
	}
	return DefaultOIDCRecheck
}

// DefaultOIDCRecheck is SHIPFILE_OIDC_RECHECK's default.
const DefaultOIDCRecheck = 15 * time.Minute
