package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// SessionStore is the persistence of web UI sessions and of the login throttle.
type SessionStore interface {
	// CreateSession stores a new session and writes ch in the same transaction.
	CreateSession(ctx context.Context, s Session, ch AccountChange) error
	// SessionUser returns the session with that id hash and its user.
	SessionUser(ctx context.Context, idHash []byte) (Session, app.User, error)
	TouchSession(ctx context.Context, idHash []byte, lastSeen, expiresAt time.Time) error
	// DeleteSession ends a session and writes ch in the same transaction, when
	// there was such a session.
	DeleteSession(ctx context.Context, idHash []byte, ch AccountChange) error
	// WriteAccountChange writes audit entries and notices that go with no other change.
	WriteAccountChange(ctx context.Context, ch AccountChange) error
	DeleteExpiredSessions(ctx context.Context, now time.Time) error
	// CountLoginAttempt counts a sign-in attempt as a failure of every key, before
	// its password is checked, in one statement (so parallel attempts are all
	// counted): in the window that starts at or after windowStart (an older window
	// starts again at now), locking a key until lockUntil once it reaches
	// maxFailures. It returns the highest count among the keys after this attempt
	// and the latest lock that was already in force before it.
	CountLoginAttempt(ctx context.Context, keys []string, now, windowStart, lockUntil time.Time, maxFailures int) (LoginCount, error)
	// RefundLoginAttempt takes back the attempt of a sign-in that succeeded: key's
	// count goes down by one, and a lock that this attempt set is lifted.
	RefundLoginAttempt(ctx context.Context, key string, maxFailures int) error
	ClearLoginFailures(ctx context.Context, key string) error
	// DeleteStaleLoginFailures forgets the counts whose window began before
	// windowStart and whose lock, if any, is over.
	DeleteStaleLoginFailures(ctx context.Context, now, windowStart time.Time) error
}

// Session is a signed-in browser. The raw id lives only in the browser's cookie; the
// store keeps its SHA-256.
type Session struct {
	IDHash     []byte
	UserID     int64
	CreatedAt  time.Time
	LastSeenAt time.Time
	ExpiresAt  time.Time
	// OIDC: the identity a session begun through the OpenID provider came from, the
	// provider's refresh token sealed (secretbox; "" when the provider gave none) and
	// when the next recheck is due. Nil for a password sign-in.
	OIDC *SessionOIDC
}

// SessionOIDC is what a session begun through the OpenID provider keeps of it.
type SessionOIDC struct {
	Issuer, Subject string
	SealedRefresh   string
	CheckAt         time.Time
}

// SessionConfig bounds sessions and failed sign-ins.
type SessionConfig struct {
	// Lifetime is the longest a session lasts, however active.
	Lifetime time.Duration
	// IdleTimeout ends a session nobody used for that long.
	IdleTimeout time.Duration
	// MaxFailures failed sign-ins for one e-mail address, or from one IP address,
	// within Lockout lock that address for Lockout.
	MaxFailures int
	Lockout     time.Duration
}

// Sessions signs users in to the web UI: password check, login throttle, sessions.
type Sessions struct {
	store    SessionStore
	identity *Identity
	cfg      SessionConfig
	now      func() time.Time
	// sealer seals the provider's refresh tokens; recheck is how often a session
	// begun through the provider is checked again (WithOIDCRecheck).
	sealer  Sealer
	recheck time.Duration
}

// NewSessions returns the session service.
func NewSessions(store SessionStore, identity *Identity, cfg SessionConfig, opts ...SessionsOption) *Sessions {
	s := &Sessions{store: store, identity: identity, cfg: cfg, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// sessionIDBytes is the entropy of a session id.
const sessionIDBytes = 32

// touchResolution bounds how often a session's last use is written.
const touchResolution = time.Minute

// ErrBadCredentials is the one answer for an unknown e-mail, a wrong password and a
// disabled user.
var ErrBadCredentials = &app.Error{Kind: app.KindUnauthenticated, Detail: "wrong e-mail address or password"}

// ThrottledError is the answer to a sign-in while its e-mail address or IP address is
// locked after too many failures.
type ThrottledError struct {
	Until time.Time
}

func (e *ThrottledError) Error() string {
	return "too many failed sign-ins; try again later"
}

// LoginCount is what CountLoginAttempt found.
type LoginCount struct {
	// Failures is the highest count among the keys, this attempt included.
	Failures int
	// LockedUntil is the latest lock in force before this attempt, if any.
	LockedUntil *time.Time
}

// LoginAllowed decides whether an attempt counted as c may have its password
// checked: not while a lock is in force, and not beyond the maxFailures-th attempt
// of the window. A refused attempt may retry at the time returned.
func LoginAllowed(c LoginCount, now time.Time, maxFailures int, lockout time.Duration) (bool, time.Time) {
	if c.LockedUntil != nil && c.LockedUntil.After(now) {
		return false, *c.LockedUntil
	}
	if c.Failures > maxFailures {
		return false, now.Add(lockout)
	}
	return true, time.Time{}
}

// Login checks an e-mail address and password and opens a session. It returns the
// user and the raw session id, which goes into the cookie and nowhere else.
//
// The attempt is counted as a failure of the address and of the client's IP address
// before the password is checked, so however many attempts run in parallel, at most
// MaxFailures passwords are checked in a window; the rest, and every attempt while
// the address or IP is locked, get a *ThrottledError without a check. A success
// takes its count back.
func (s *Sessions) Login(ctx context.Context, email, password string, client app.Client) (app.User, string, error) {
	now := s.now()
	emailKey := LoginEmailKey(email)
	keys := []string{emailKey}
	ipKey := ""
	if client.IP != "" {
		// An IPv6 client by its /64, as the request rates count it.
		ipKey = "ip:" + app.RateKey(client.IP)
		keys = append(keys, ipKey)
	}
	count, err := s.store.CountLoginAttempt(ctx, keys, now, now.Add(-s.cfg.Lockout), now.Add(s.cfg.Lockout), s.cfg.MaxFailures)
	if err != nil {
		return app.User{}, "", err
	}
	if ok, until := LoginAllowed(count, now, s.cfg.MaxFailures, s.cfg.Lockout); !ok {
		return app.User{}, "", &ThrottledError{Until: until}
	}
	u, err := s.identity.CheckPassword(ctx, email, password)
	if errors.Is(err, app.ErrUnauthenticated) {
		// One row per IP and hour counts them: a guesser does not grow the log.
		failed := System.Audit(ActionSignInFailed, "")
		failed.IP, failed.UserAgent, failed.Hourly = client.IP, client.UserAgent, true
		if err := s.store.WriteAccountChange(ctx, AccountChange{Audit: []app.AuditEntry{failed}}); err != nil {
			return app.User{}, "", err
		}
		return app.User{}, "", ErrBadCredentials
	}
	if err != nil {
		// No password was checked (the hasher was busy, the database failed): the
		// attempt does not count against the user.
		for _, k := range keys {
			_ = s.store.RefundLoginAttempt(context.WithoutCancel(ctx), k, s.cfg.MaxFailures)
		}
		return app.User{}, "", err
	}
	// A success clears the address's count, and takes back its own count of the IP
	// (not the IP's whole count: signing in to one's own account must not reset the
	// count of guesses at others).
	if err := s.store.ClearLoginFailures(ctx, emailKey); err != nil {
		return app.User{}, "", err
	}
	if ipKey != "" {
		if err := s.store.RefundLoginAttempt(ctx, ipKey, s.cfg.MaxFailures); err != nil {
			return app.User{}, "", err
		}
	}
	raw, hash, err := newSessionID()
	if err != nil {
		return app.User{}, "", err
	}
	sess := Session{IDHash: hash, UserID: u.ID, CreatedAt: now, LastSeenAt: now, ExpiresAt: s.expiry(now, now)}
	signIn := AccountChange{Audit: []app.AuditEntry{UserActor(u, client).Audit(ActionSignIn, "password")}}
	if err := s.store.CreateSession(ctx, sess, signIn); err != nil {
		return app.User{}, "", err
	}
	// Sweep the sessions nobody will use again and the counts that no longer
	// matter; a failure here harms no one.
	_ = s.store.DeleteExpiredSessions(ctx, now)
	_ = s.store.DeleteStaleLoginFailures(ctx, now, now.Add(-s.cfg.Lockout))
	return u, raw, nil
}

// LoginEmailKey is the throttle key of the e-mail address a sign-in names: the
// address in lower case, or, for an address longer than any user's (app.MaxEmailLen), a
// SHA-256 of it, so that the key of whatever a client sends fits PostgreSQL's index
// (a key of thousands of bytes does not) and every address still counts on its own.
func LoginEmailKey(email string) string {
	e := strings.ToLower(strings.TrimSpace(email))
	if len(e) <= app.MaxEmailLen {
		return "email:" + e
	}
	sum := sha256.Sum256([]byte(e))
	return "email-sha256:" + hex.EncodeToString(sum[:])
}

// DefaultSweepEvery is how often a gateway forgets the sessions that ended and the
// sign-in counts whose window and lock are over (Sessions.RunSweeper).
const DefaultSweepEvery = time.Minute

// Sweep forgets the sessions that ended and the sign-in counts whose window and lock
// are both over, so that neither table grows with the addresses tried.
func (s *Sessions) Sweep(ctx context.Context) error {
	now := s.now()
	return errors.Join(
		s.store.DeleteExpiredSessions(ctx, now),
		s.store.DeleteStaleLoginFailures(ctx, now, now.Add(-s.cfg.Lockout)),
	)
}

// RunSweeper sweeps every interval until ctx ends (every gateway instance runs one;
// a sweep that fails is tried again at the next tick), so the tables stay bounded
// however many failed sign-ins come and whether or not anyone signs in successfully
// (which sweeps too).
func (s *Sessions) RunSweeper(ctx context.Context, every time.Duration, onErr func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Sweep(ctx); err != nil && ctx.Err() == nil && onErr != nil {
				onErr(err)
			}
		}
	}
}

// Resolve returns the user of a raw session id, extending the session while it is
// used. Unknown, expired and malformed ids, and disabled users, are
// ErrUnauthenticated.
func (s *Sessions) Resolve(ctx context.Context, raw string) (app.User, Session, error) {
	hash, ok := sessionHash(raw)
	if !ok {
		return app.User{}, Session{}, app.ErrUnauthenticated
	}
	sess, u, err := s.store.SessionUser(ctx, hash)
	if errors.Is(err, app.ErrNotFound) {
		return app.User{}, Session{}, app.ErrUnauthenticated
	}
	if err != nil {
		return app.User{}, Session{}, err
	}
	now := s.now()
	if !now.Before(sess.ExpiresAt) || u.Disabled {
		return app.User{}, Session{}, app.ErrUnauthenticated
	}
	if now.Sub(sess.LastSeenAt) >= touchResolution {
		sess.LastSeenAt, sess.ExpiresAt = now, s.expiry(sess.CreatedAt, now)
		if err := s.store.TouchSession(ctx, hash, sess.LastSeenAt, sess.ExpiresAt); err != nil {
			return app.User{}, Session{}, err
		}
	}
	return u, sess, nil
}

// Logout ends the session with that raw id, signed out by by; an unknown one is
// already ended.
func (s *Sessions) Logout(ctx context.Context, raw string, by Actor) error {
	hash, ok := sessionHash(raw)
	if !ok {
		return nil
	}
	return s.store.DeleteSession(ctx, hash, AccountChange{Audit: []app.AuditEntry{by.Audit(ActionSignOut, "")}})
}

// expiry is when a session created at created and last used at seen ends.
func (s *Sessions) expiry(created, seen time.Time) time.Time {
	idle, hard := seen.Add(s.cfg.IdleTimeout), created.Add(s.cfg.Lifetime)
	if idle.Before(hard) {
		return idle
	}
	return hard
}

func newSessionID() (string, []byte, error) {
	b := make([]byte, sessionIDBytes)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("session id: %w", err)
	}
	raw := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(raw))
	return raw, sum[:], nil
}

// sessionHash hashes a raw session id, refusing anything that is not 43 base64url
// characters without touching the database.
func sessionHash(raw string) ([]byte, bool) {
	if len(raw) != 43 {
		return nil, false
	}
	if _, err := base64.RawURLEncoding.DecodeString(raw); err != nil {
		return nil, false
	}
	sum := sha256.Sum256([]byte(raw))
	return sum[:], true
}
