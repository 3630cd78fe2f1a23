package store

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
)

var _ links.Store = (*Postgres)(nil)

// TakeLinkBytes takes costs[i] from the budget of fileIDs[i] through the link
// (docs/API.md, "Download limit") and returns the files taken: one conditional UPDATE, which
// PostgreSQL serialises on each budget row, so concurrent answers on any number of
// gateways never take past a budget. A file's first answer through the link makes its
// budget row first.
func (s *Postgres) TakeLinkBytes(ctx context.Context, packageID uuid.UUID, linkHash []byte, fileIDs []uuid.UUID, costs []int64, counted bool) ([]uuid.UUID, error) {
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
func (s *Postgres) ReturnLinkBytes(ctx context.Context, linkHash []byte, fileIDs []uuid.UUID, amounts []int64) error {
	return s.q.ReturnLinkBytes(ctx, ReturnLinkBytesParams{LinkHash: linkHash, FileIds: fileIDs, Amounts: amounts})
}

// AddUnlockAttempt records an unlock attempt and returns its id, its time and the
// link's failures recorded before it within window, newest first. Attempts of one
// link are serialised, so each sees every attempt before it: parallel guesses cannot
// all see a count under the limit. Every time is PostgreSQL's, never the gateway's:
// with the gateways' own clocks, one running ahead would see (and prune) the other
// gateways' failures as out of the window and check more than the limit.
func (s *Postgres) AddUnlockAttempt(ctx context.Context, packageID, recipientID uuid.UUID, window time.Duration) (int64, time.Time, []time.Time, error) {
	var id int64
	var at time.Time
	var rows []time.Time
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
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
func (s *Postgres) DeleteUnlockAttempt(ctx context.Context, id int64) error {
	return s.q.DeleteUnlockFailure(ctx, id)
}

func int32Ptr(n *int) *int32 {
	if n == nil {
		return nil
	}
	v := int32(*n)
	return &v
}

func intPtr(v *int32) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}
