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

var _ identity.RecheckStore = (*Store)(nil)

// writeAccountChange writes an account change's audit entries and notices in tx, the
// transaction of the change.
func writeAccountChange(ctx context.Context, tx pgx.Tx, ch identity.AccountChange) error {
	if err := sqldb.WriteAudit(ctx, tx, ch.Audit...); err != nil {
		return err
	}
	q := New(tx)
	for _, n := range ch.Notices {
		if err := q.InsertAccountNotice(ctx, InsertAccountNoticeParams{UserID: n.UserID, Event: n.Event, Detail: n.Detail}); err != nil {
			return err
		}
	}
	return nil
}

// inAccountTx runs fn in a transaction and writes what it returns (the change's audit
// entries and notices) in the same transaction.
func (s *Store) inAccountTx(ctx context.Context, fn func(q *Queries) (identity.AccountChange, error)) error {
	return pgx.BeginFunc(ctx, s.sql.Pool, func(tx pgx.Tx) error {
		ch, err := fn(s.q.WithTx(tx))
		if err != nil {
			return err
		}
		return writeAccountChange(ctx, tx, ch)
	})
}

// WriteAccountChange writes audit entries and notices that go with no other change.
func (s *Store) WriteAccountChange(ctx context.Context, ch identity.AccountChange) error {
	if len(ch.Audit)+len(ch.Notices) == 0 {
		return nil
	}
	return s.inAccountTx(ctx, func(*Queries) (identity.AccountChange, error) { return ch, nil })
}

// UnlinkUserOIDC removes the user's identity, ends the sessions begun through it and
// writes ch, in one transaction.
func (s *Store) UnlinkUserOIDC(ctx context.Context, id int64, issuer, subject string, ch identity.AccountChange) (app.User, error) {
	var u app.User
	err := s.inAccountTx(ctx, func(q *Queries) (identity.AccountChange, error) {
		r, err := q.UnlinkUserOIDC(ctx, UnlinkUserOIDCParams{ID: id, Issuer: issuer, Subject: subject})
		if errors.Is(err, pgx.ErrNoRows) {
			return ch, app.Conflict("the identity is not linked to this account, or the account has no password")
		}
		if err != nil {
			return ch, err
		}
		u = toUser(r)
		return ch, q.DeleteOIDCSessions(ctx, DeleteOIDCSessionsParams{UserID: id, Issuer: issuer, Subject: subject})
	})
	return u, err
}

// ClaimDueOIDCSessions hands the caller the live sessions whose recheck is due at now,
// moving their next check to next.
func (s *Store) ClaimDueOIDCSessions(ctx context.Context, now, next time.Time, limit int) ([]identity.Session, error) {
	rows, err := s.q.ClaimDueOIDCSessions(ctx, ClaimDueOIDCSessionsParams{Now: now, Next: next, MaxRows: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]identity.Session, len(rows))
	for i, r := range rows {
		out[i] = toSession(r)
	}
	return out, nil
}

// SetSessionRefresh keeps a session's new sealed refresh token.
func (s *Store) SetSessionRefresh(ctx context.Context, idHash []byte, sealed string) error {
	return s.q.SetSessionRefresh(ctx, SetSessionRefreshParams{IDHash: idHash, Sealed: sealed})
}

// EndOIDCSessions ends the user's sessions begun through (issuer, subject) and writes
// ch, in one transaction.
func (s *Store) EndOIDCSessions(ctx context.Context, userID int64, issuer, subject string, ch identity.AccountChange) error {
	return s.inAccountTx(ctx, func(q *Queries) (identity.AccountChange, error) {
		return ch, q.DeleteOIDCSessions(ctx, DeleteOIDCSessionsParams{UserID: userID, Issuer: issuer, Subject: subject})
	})
}

func toSession(w WebSession) identity.Session {
	s := identity.Session{IDHash: w.IDHash, UserID: w.UserID, CreatedAt: w.CreatedAt, LastSeenAt: w.LastSeenAt, ExpiresAt: w.ExpiresAt}
	if w.OidcSubject != nil && w.OidcIssuer != nil {
		o := &identity.SessionOIDC{Issuer: *w.OidcIssuer, Subject: *w.OidcSubject}
		if w.OidcRefresh != nil {
			o.SealedRefresh = *w.OidcRefresh
		}
		if w.OidcCheckAt != nil {
			o.CheckAt = *w.OidcCheckAt
		}
		s.OIDC = o
	}
	return s
}
