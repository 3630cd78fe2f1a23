package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TakeDownload counts one download of a file through the link unless limit is
// reached: one conditional UPDATE, which PostgreSQL serialises on the file's row, so
// concurrent downloads on any number of gateways never go past the limit.
func (s *Postgres) TakeDownload(ctx context.Context, packageID, fileID uuid.UUID, limit *int) (bool, error) {
	_, err := s.q.TakeDownload(ctx, TakeDownloadParams{PackageID: packageID, FileID: fileID, MaxDownloads: int32Ptr(limit)})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// TakeArchiveDownloads counts one download of each file not at its limit and returns
// the files counted.
func (s *Postgres) TakeArchiveDownloads(ctx context.Context, packageID uuid.UUID, fileIDs []uuid.UUID, limit *int) ([]uuid.UUID, error) {
	return s.q.TakeArchiveDownloads(ctx, TakeArchiveDownloadsParams{PackageID: packageID, FileIds: fileIDs, MaxDownloads: int32Ptr(limit)})
}

// ReturnDownloads gives back downloads that failed before their last byte.
func (s *Postgres) ReturnDownloads(ctx context.Context, fileIDs []uuid.UUID) error {
	return s.q.ReturnDownloads(ctx, fileIDs)
}

// AddUnlockAttempt records an unlock attempt and returns its id, its time and the
// link's failures recorded before it within window, newest first. Attempts of one
// link are serialised, so each sees every attempt before it: parallel guesses cannot
// all see a count under the limit. Every time is PostgreSQL's, never the gateway's:
// with the gateways' own clocks, one running ahead would see (and prune) the other
// gateways' failures as out of the window and check more than the limit.
func (s *Postgres) AddUnlockAttempt(ctx context.Context, packageID uuid.UUID, window time.Duration) (int64, time.Time, []time.Time, error) {
	var id int64
	var at time.Time
	var rows []time.Time
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.LockUnlockAttempts(ctx, packageID.String()); err != nil {
			return err
		}
		attempt, err := q.InsertUnlockFailure(ctx, packageID)
		if err != nil {
			return err
		}
		id, at = attempt.ID, attempt.FailedAt
		since := at.Add(-window)
		if rows, err = q.UnlockFailures(ctx, UnlockFailuresParams{PackageID: packageID, Since: since, BeforeID: id}); err != nil {
			return err
		}
		// Keeps the table at most one window of attempts per link.
		return q.ForgetOldUnlockFailures(ctx, ForgetOldUnlockFailuresParams{PackageID: packageID, Since: since})
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
