package links

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// Rules of grants and the unlock throttle (docs/API.md, "Protected links").
const (
	// GrantLifetime is how long a grant (and its cookie) opens a protected link.
	GrantLifetime = 12 * time.Hour
	// UnlockMaxFailures wrong passwords within UnlockWindow make unlock answer 429,
	// whatever the password, for the rest of the window.
	UnlockMaxFailures = 5
	UnlockWindow      = 15 * time.Minute
)

// Errors of protected and limited links.
var (
	// ErrLinkLocked: the link has a password and the request carries no valid grant.
	ErrLinkLocked = &app.Error{Kind: app.KindUnauthenticated, Detail: "this link is protected by a password: unlock it first"}
	// ErrWrongPassword: unlock was given a wrong password.
	ErrWrongPassword = &app.Error{Kind: app.KindUnauthenticated, Detail: "wrong password"}
	// ErrFileUsedUp: the file has had its downloads through the link.
	ErrFileUsedUp = &app.Error{Kind: app.KindGone, Detail: "this file has reached its download limit"}
)

// LinkThrottledError is an unlock refused for a while after too many wrong passwords
// (429): RetryAfter says how long.
type LinkThrottledError struct {
	Detail     string
	RetryAfter time.Duration
}

func (e *LinkThrottledError) Error() string { return e.Detail }

// NewGrant mints a grant for p's link valid until now + GrantLifetime. It is keyed by
// the package's password hash (a server-side secret read from the database on every
// check), so a new password, or none, ends every grant at once; a revoked, expired,
// deleted or used-up link answers 410 before any grant is looked at.
func NewGrant(p app.Package, now time.Time) (string, time.Time) {
	exp := now.Add(GrantLifetime).UTC().Truncate(time.Second)
	e := strconv.FormatInt(exp.Unix(), 10)
	return "v1." + e + "." + base64.RawURLEncoding.EncodeToString(grantMAC(p, e)), exp
}

// CheckGrant reports whether grant opens p's link at now.
func CheckGrant(p app.Package, grant string, now time.Time) bool {
	if p.PasswordHash == "" || len(grant) > 200 {
		return false
	}
	rest, ok := strings.CutPrefix(grant, "v1.")
	if !ok {
		return false
	}
	e, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return false
	}
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil || !now.Before(time.Unix(exp, 0)) {
		return false
	}
	got, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	return err == nil && hmac.Equal(got, grantMAC(p, e))
}

func grantMAC(p app.Package, exp string) []byte {
	m := hmac.New(sha256.New, []byte("shipfile link grant\x00"+p.PasswordHash))
	m.Write([]byte(p.ID.String() + "|" + hex.EncodeToString(p.LinkHash) + "|" + exp))
	return m.Sum(nil)
}

// UnlockRetryAfter says whether an unlock is throttled, given the times of the
// link's earlier wrong passwords within the window (newest first), and for how long.
func UnlockRetryAfter(earlier []time.Time, now time.Time) (time.Duration, bool) {
	var recent []time.Time
	for _, t := range earlier {
		if now.Sub(t) < UnlockWindow {
			recent = append(recent, t)
		}
	}
	if len(recent) < UnlockMaxFailures {
		return 0, false
	}
	// The window lasts until the UnlockMaxFailures-th newest failure leaves it.
	wait := recent[UnlockMaxFailures-1].Add(UnlockWindow).Sub(now)
	return max(wait, time.Second), true
}

// Unlock checks a password against a protected link and returns a grant for it. A
// dead link is 410 before anything else; an unprotected one 409. Every attempt is
// counted before the password is checked, so parallel wrong passwords get at most
// UnlockMaxFailures checks per window; then LinkThrottledError. Wrong passwords are
// audited.
func (s *Links) Unlock(ctx context.Context, token, password string, client app.Client) (string, time.Time, error) {
	p, err := s.liveLink(ctx, token, client)
	if err != nil {
		return "", time.Time{}, err
	}
	if !p.PasswordProtected() {
		return "", time.Time{}, app.Conflict("this link has no password")
	}
	// The window is on the database's clock (at, and the times of earlier failures),
	// never this gateway's: gateways whose clocks disagree still count together.
	attempt, at, earlier, err := s.store.AddUnlockAttempt(ctx, p.ID, *p.LinkRecipientID(), UnlockWindow)
	if err != nil {
		return "", time.Time{}, err
	}
	forget := func() { _ = s.store.DeleteUnlockAttempt(context.WithoutCancel(ctx), attempt) }
	if wait, throttled := UnlockRetryAfter(earlier, at); throttled {
		forget()
		return "", time.Time{}, &LinkThrottledError{Detail: "too many wrong passwords for this link; try again later", RetryAfter: wait}
	}
	ok := false
	if len(password) <= 4*packages.MaxLinkPasswordLen {
		ok, err = s.p.Hasher().Verify(ctx, p.PasswordHash, password)
		if err != nil {
			forget()
			return "", time.Time{}, err
		}
	}
	if !ok {
		_ = s.store.WriteEffects(ctx, app.Effects{Audit: []app.AuditEntry{p.LinkAudit(client, "link.unlock_failed", nil)}})
		return "", time.Time{}, ErrWrongPassword
	}
	forget()
	if err := s.store.RecordLinkUse(ctx, p.LinkHash, app.Effects{Audit: []app.AuditEntry{p.LinkAudit(client, "link.unlock", nil)}}); err != nil {
		return "", time.Time{}, err
	}
	grant, exp := NewGrant(p, s.now())
	return grant, exp, nil
}
