// Package linksdb is the links domain's store on PostgreSQL (app/links' Store and
// RateStore): the package and recipient a magic link opens, the link's uses, the
// download budgets of files through a link, the throttle of a protected link's unlock
// and the per-client request rates of the anonymous routes (linkrate.go). Its SQL is
// queries.sql, compiled by sqlc. The files as a link sees them are read through the
// package store (store.Postgres, links.Files), whose statements serve the owner too.
package linksdb

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
	"github.com/shipfile/shipfile/services/gateway/internal/store/packagerow"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// Store implements the links domain's stores.
type Store struct {
	sql *sqldb.DB
	q   *Queries
}

var _ links.Store = (*Store)(nil)

// NewStore returns the store on d's pool.
func NewStore(d *sqldb.DB) *Store { return &Store{sql: d, q: New(d.Pool)} }

// PackageByLink returns the package with the magic link that hashes to hash, with
// the link's recipient (the package's other recipients are not loaded).
func (s *Store) PackageByLink(ctx context.Context, hash []byte) (app.Package, error) {
	row, err := s.q.PackageByLink(ctx, hash)
	if err != nil {
		return app.Package{}, sqldb.NotFound(err, "package")
	}
	p := packagerow.ToPackage(packagerow.Package(row.Package))
	r := toRecipient(row.Recipient)
	p.Link, p.LinkHash = &r, r.LinkHash
	p.LinkUseCount, p.LinkLastUsedAt = r.UseCount, r.LastUsedAt
	p.UsedUp = row.UsedUp
	return p, nil
}

// RecordLinkUse counts a use of the link that hashes to linkHash and writes the effects.
func (s *Store) RecordLinkUse(ctx context.Context, linkHash []byte, fx app.Effects) error {
	return s.sql.InTx(ctx, func(tx pgx.Tx) error {
		if err := s.q.WithTx(tx).UseLink(ctx, linkHash); err != nil {
			return err
		}
		return s.sql.WriteEffects(ctx, tx, fx)
	})
}

// WriteEffects writes effects that belong to no change of a link (an invalid link's
// audit entry), as one batch (one implicit transaction, one round trip).
func (s *Store) WriteEffects(ctx context.Context, fx app.Effects) error {
	return s.sql.WriteEffectsAlone(ctx, fx)
}

// TakeLinkBytes takes costs[i] from the budget of fileIDs[i] through the link
// (docs/API.md, "Download limit") and returns the files taken: one conditional UPDATE, which
// PostgreSQL serialises on each budget row, so concurrent answers on any number of
// gateways never take past a budget. A file's first answer through the link makes its
// budget row first.
func (s *Store) TakeLinkBytes(ctx context.Context, packageID uuid.UUID, linkHash []byte, fileIDs []uuid.UUID, costs []int64, counted bool) ([]uuid.UUID, error) {
	take := func(ids []uuid.UUID, costs []int64) ([]uuid.UUID, error) {
		return s.q.TakeLinkBytes(ctx, TakeLinkBytesParams{PackageID: packageID, LinkHash: linkHash, FileIds: ids, Costs: costs, Counted: counted})
	}
	taken, err := take(fileIDs, costs)
	if err != nil || len(taken) == len(fileIDs) {
		return taken, err
	}
	// Those not taken may have no row yet (or a spent budget: then again nothing).
	var ids []uuid.UUID
	var rest []int64
	for i, id := range fileIDs {
		if !slices.Contains(taken, id) {
			ids, rest = append(ids, id), append(rest, costs[i])
		}
	}
	if err := s.q.EnsureLinkBudgets(ctx, EnsureLinkBudgetsParams{FileIds: ids, LinkHash: linkHash}); err != nil {
		return nil, err
	}
	more, err := take(ids, rest)
	if err != nil {
		return nil, err
	}
	return append(taken, more...), nil
}

// ReturnLinkBytes gives amounts[i] back to the budget of fileIDs[i] through the link.
func (s *Store) ReturnLinkBytes(ctx context.Context, linkHash []byte, fileIDs []uuid.UUID, amounts []int64) error {
	return s.q.ReturnLinkBytes(ctx, ReturnLinkBytesParams{LinkHash: linkHash, FileIds: fileIDs, Amounts: amounts})
}

// AddUnlockAttempt records an unlock attempt and returns its id, its time and the
// link's failures recorded before it within window, newest first. Attempts of one
// link are serialised, so each sees every attempt before it: parallel guesses cannot
// all see a count under the limit. Every time is PostgreSQL's, never the gateway's:
// with the gateways' own clocks, one running ahead would see (and prune) the other
// gateways' failures as out of the window and check more than the limit.
func (s *Store) AddUnlockAttempt(ctx context.Context, packageID, recipientID uuid.UUID, window time.Duration) (int64, time.Time, []time.Time, error) {
	var id int64
	var at time.Time
	var rows []time.Time
	err := pgx.BeginFunc(ctx, s.sql.Pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.LockUnlockAttempts(ctx, recipientID.String()); err != nil {
			return err
		}
		attempt, err := q.InsertUnlockFailure(ctx, InsertUnlockFailureParams{PackageID: packageID, RecipientID: &recipientID})
		if err != nil {
			return err
		}
		id, at = attempt.ID, attempt.FailedAt
		since := at.Add(-window)
		if rows, err = q.UnlockFailures(ctx, UnlockFailuresParams{RecipientID: &recipientID, Since: since, BeforeID: id}); err != nil {
			return err
		}
		// Keeps the table at most one window of attempts per link.
		return q.ForgetOldUnlockFailures(ctx, ForgetOldUnlockFailuresParams{RecipientID: &recipientID, Since: since})
	})
	if err != nil {
		return 0, time.Time{}, nil, err
	}
	return id, at, rows, nil
}

// DeleteUnlockAttempt forgets an attempt that was not a wrong password.
func (s *Store) DeleteUnlockAttempt(ctx context.Context, id int64) error {
	return s.q.DeleteUnlockFailure(ctx, id)
}

func toRecipient(r Recipient) app.Recipient {
	return app.Recipient{
		ID: r.ID, Email: r.Email, Name: r.Name, Language: r.Language, LinkHash: r.LinkHash, LinkState: app.LinkState(r.LinkState),
		UseCount: r.UseCount, LastUsedAt: r.LastUsedAt, DownloadCount: r.DownloadCount, CreatedAt: r.CreatedAt,
		RevokedAt: r.RevokedAt,
	}
}
