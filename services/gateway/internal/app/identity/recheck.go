package identity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// OIDCRefresher asks the OpenID provider about an identity again.
type OIDCRefresher interface {
	// Refresh redeems a refresh token: the identity's claims now (from a new ID
	// token, or userinfo) and the refresh token to keep (the same one when the
	// provider does not rotate them). ErrRefreshRefused: the provider refused the
	// token (the grant was revoked, the account disabled there); any other error is
	// the provider being unreachable.
	Refresh(ctx context.Context, refreshToken string) (OIDCClaims, string, error)
}

// ErrRefreshRefused is the provider's refusal of a refresh token.
var ErrRefreshRefused = errors.New("the identity provider refused the refresh token")

// RecheckStore is the persistence of the rechecks.
type RecheckStore interface {
	// ClaimDueOIDCSessions moves the next check of up to limit live sessions due at
	// now to next and returns them: each due session goes to one caller, whichever
	// gateway instance it runs on.
	ClaimDueOIDCSessions(ctx context.Context, now, next time.Time, limit int) ([]Session, error)
	// SetSessionRefresh keeps a session's new sealed refresh token.
	SetSessionRefresh(ctx context.Context, idHash []byte, sealed string) error
	// EndOIDCSessions ends every session of the user begun through (issuer,
	// subject) and writes ch, in one transaction.
	EndOIDCSessions(ctx context.Context, userID int64, issuer, subject string, ch AccountChange) error
	GetUser(ctx context.Context, id int64) (app.User, error)
}

// OIDCRecheck checks the sessions begun through the OpenID provider again every
// interval, while they live: it redeems each one's refresh token, ends the user's
// sessions from that identity when the provider refuses or the person left the
// allowed groups, and applies a role change from the groups at once (group sync:
// never demoting the last active admin).
type OIDCRecheck struct {
	store     RecheckStore
	oidc      OIDCStore
	identity  *Identity
	refresher OIDCRefresher
	sealer    Sealer
	policy    OIDCPolicy
	interval  time.Duration
	log       *slog.Logger
	now       func() time.Time
}

// recheckBatch is how many due sessions one pass claims at once.
const recheckBatch = 50

// NewOIDCRecheck returns the rechecks of sessions begun through refresher's provider.
func NewOIDCRecheck(store RecheckStore, oidc OIDCStore, id *Identity, refresher OIDCRefresher, sealer Sealer, policy OIDCPolicy, interval time.Duration, log *slog.Logger) *OIDCRecheck {
	if interval <= 0 {
		interval = DefaultOIDCRecheck
	}
	return &OIDCRecheck{store: store, oidc: oidc, identity: id, refresher: refresher, sealer: sealer, policy: policy,
		interval: interval, log: log, now: time.Now}
}

// Tick is how often Run looks for due sessions: a quarter of the interval, between
// 100 ms and a minute, so a session is checked at most that late.
func (r *OIDCRecheck) Tick() time.Duration {
	return min(max(r.interval/4, 100*time.Millisecond), time.Minute)
}

// Run checks the due sessions every Tick until ctx ends (every gateway instance runs
// it; a session is claimed by one of them per interval).
func (r *OIDCRecheck) Run(ctx context.Context) {
	t := time.NewTicker(r.Tick())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.Pass(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("recheck sessions at the identity provider", "err", err)
			}
		}
	}
}

// Pass checks every session due now.
func (r *OIDCRecheck) Pass(ctx context.Context) error {
	for {
		now := r.now()
		due, err := r.store.ClaimDueOIDCSessions(ctx, now, now.Add(r.interval), recheckBatch)
		if err != nil {
			return err
		}
		for _, s := range due {
			if err := r.check(ctx, s); err != nil {
				if ctx.Err() != nil {
					return err
				}
				r.log.Warn("recheck of a session failed; tried again at the next interval", "user_id", s.UserID, "err", err)
			}
		}
		if len(due) < recheckBatch {
			return nil
		}
	}
}

// check asks the provider about one session's identity and acts on the answer.
func (r *OIDCRecheck) check(ctx context.Context, s Session) error {
	o := s.OIDC
	if o == nil {
		return nil
	}
	end := func(why string) error {
		detail := fmt.Sprintf("user %d: issuer %s, subject %s: %s", s.UserID, o.Issuer, o.Subject, why)
		r.log.Info("sessions from the identity provider ended", "user_id", s.UserID, "why", why)
		return r.store.EndOIDCSessions(ctx, s.UserID, o.Issuer, o.Subject,
			AccountChange{Audit: []app.AuditEntry{System.Audit(ActionSessionEnded, detail)}})
	}
	if o.SealedRefresh == "" {
		return end("the provider gave no refresh token, so the session cannot be checked again")
	}
	refresh, err := r.sealer.Open(o.SealedRefresh)
	if err != nil {
		return end("the refresh token cannot be opened with SHIPFILE_SECRET_KEY")
	}
	claims, next, err := r.refresher.Refresh(ctx, refresh)
	if errors.Is(err, ErrRefreshRefused) {
		return end("the provider refused the refresh token")
	}
	if err != nil {
		return err
	}
	if claims.Subject != o.Subject || (claims.Issuer != "" && claims.Issuer != o.Issuer) {
		return end("the provider answered for another identity")
	}
	if !r.policy.Allowed(claims.Groups) {
		return end("no longer in SHIPFILE_OIDC_ALLOWED_GROUPS")
	}
	if next != "" && next != refresh {
		sealed, err := r.sealer.Seal(next)
		if err != nil {
			return err
		}
		if err := r.store.SetSessionRefresh(ctx, s.IDHash, sealed); err != nil {
			return err
		}
	}
	if err := r.identity.syncGroups(ctx, s.UserID, claims.Groups); err != nil {
		return err
	}
	role, ok := r.policy.Role(claims.Groups)
	if !ok {
		return nil
	}
	u, err := r.store.GetUser(ctx, s.UserID)
	if err != nil || u.Role == role || u.Disabled {
		return err
	}
	_, err = r.identity.syncRole(ctx, r.oidc, u, role, System)
	return err
}
