// Package transfersdb is the resumable uploads' store on PostgreSQL (transfers.Store):
// the uploads' rows, their leases and the asks to let go (release.go). Its SQL is
// queries.sql, compiled by sqlc. An upload is created and completed in a transaction
// of its package, which the packages' store runs (Packages).
package transfersdb

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/transfers"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// Packages runs the package transactions an upload's rows join: store.Postgres.
type Packages interface {
	// InPackageTx runs fn in a transaction that holds the package's row lock.
	InPackageTx(ctx context.Context, id uuid.UUID, fn func(tx pgx.Tx, p app.Package) error) error
	// AddFileTx records a stored file in its package (as AddFile does) and runs also in
	// the same transaction, after change and before the file's row.
	AddFileTx(ctx context.Context, f app.File, change func(p *app.Package) (app.Effects, error), also func(tx pgx.Tx) error) (app.Package, error)
}

// Store implements transfers.Store.
type Store struct {
	sql      *sqldb.DB
	q        *Queries
	packages Packages
}

var _ transfers.Store = (*Store)(nil)

// NewStore returns the store on d's pool, whose uploads join the package transactions
// of packages.
func NewStore(d *sqldb.DB, packages Packages) *Store {
	return &Store{sql: d, q: New(d.Pool), packages: packages}
}

// toUpload turns a row of tus_uploads into an upload.
func toUpload(r TusUpload) (transfers.TusUpload, error) {
	u := transfers.TusUpload{
		ID: r.ID, PackageID: r.PackageID, UploadedBy: app.Uploader(r.UploadedBy), CreatorUserID: r.CreatorUserID,
		CreatorTokenID: r.CreatorTokenID, LinkHash: r.LinkHash, FileID: r.FileID, Filename: r.Filename,
		ContentType: r.ContentType, Length: r.Length, Offset: r.Offset, ObjectKey: r.ObjectKey, S3UploadID: r.S3UploadID,
		TailKey: r.TailKey, TailSize: r.TailSize, SHA256State: r.Sha256State, Completed: r.FileCompleted,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, Manifest: r.Manifest,
	}
	if err := json.Unmarshal(r.Parts, &u.Parts); err != nil {
		return transfers.TusUpload{}, fmt.Errorf("upload %s: parts: %w", u.ID, err)
	}
	return u, nil
}

// CreateUpload inserts a new upload once check accepts the counts of unfinished
// uploads, in one transaction that holds the package's row and an advisory lock on
// the creator (token, browser user or link), so parallel creations cannot both pass.
func (s *Store) CreateUpload(ctx context.Context, u transfers.TusUpload, check func(transfers.OpenUploads) error) error {
	parts, err := json.Marshal(partsOrEmpty(u.Parts))
	if err != nil {
		return err
	}
	return s.packages.InPackageTx(ctx, u.PackageID, func(tx pgx.Tx, p app.Package) error {
		q := s.q.WithTx(tx)
		key, count := creatorOf(q, u)
		if err := q.LockUploadCreator(ctx, key); err != nil {
			return err
		}
		inPackage, err := q.CountPackageOpenUploads(ctx, u.PackageID)
		if err != nil {
			return err
		}
		byCreator, err := count(ctx)
		if err != nil {
			return err
		}
		if err := check(transfers.OpenUploads{Files: p.FileCount, InPackage: int(inPackage), ByCreator: int(byCreator)}); err != nil {
			return err
		}
		return q.CreateUpload(ctx, CreateUploadParams{
			ID: u.ID, PackageID: u.PackageID, UploadedBy: string(u.UploadedBy), CreatorUserID: u.CreatorUserID,
			CreatorTokenID: u.CreatorTokenID, LinkHash: u.LinkHash, FileID: u.FileID, Filename: u.Filename,
			ContentType: u.ContentType, Length: u.Length, UploadOffset: u.Offset, ObjectKey: u.ObjectKey,
			S3UploadID: u.S3UploadID, Parts: parts, TailKey: u.TailKey, TailSize: u.TailSize, Sha256State: u.SHA256State,
			FileCompleted: u.Completed, CreatedAt: u.CreatedAt, ExpiresAt: u.ExpiresAt, Manifest: u.Manifest,
		})
	})
}

// creatorOf names the creator of u whose unfinished uploads are counted (the
// advisory lock's key) and returns its count.
func creatorOf(q *Queries, u transfers.TusUpload) (string, func(context.Context) (int64, error)) {
	switch {
	case u.CreatorTokenID != nil:
		return "tus token " + strconv.FormatInt(*u.CreatorTokenID, 10), func(ctx context.Context) (int64, error) {
			return q.CountTokenOpenUploads(ctx, u.CreatorTokenID)
		}
	case u.CreatorUserID != nil:
		return "tus user " + strconv.FormatInt(*u.CreatorUserID, 10), func(ctx context.Context) (int64, error) {
			return q.CountSessionOpenUploads(ctx, u.CreatorUserID)
		}
	default:
		return "tus link " + hex.EncodeToString(u.LinkHash), func(ctx context.Context) (int64, error) {
			return q.CountLinkOpenUploads(ctx, u.LinkHash)
		}
	}
}

// GetUpload returns an upload by id, with whether a running request holds it.
func (s *Store) GetUpload(ctx context.Context, id uuid.UUID) (transfers.TusUpload, error) {
	row, err := s.q.GetUpload(ctx, id)
	if err != nil {
		return transfers.TusUpload{}, sqldb.NotFound(err, "upload")
	}
	u, err := toUpload(row.TusUpload)
	u.Held = row.Held
	return u, err
}

// LockUpload takes the upload's lease for owner when no other lease runs; with who,
// only when who owns the upload (else ErrNotFound, and no lease is taken).
func (s *Store) LockUpload(ctx context.Context, id, owner uuid.UUID, lease time.Duration, who *transfers.TusOwner) (transfers.TusUpload, error) {
	var row TusUpload
	var err error
	if who == nil {
		row, err = s.q.LockUpload(ctx, LockUploadParams{ID: id, Owner: owner, LeaseUs: lease.Microseconds()})
	} else {
		row, err = s.q.LockOwnUpload(ctx, LockOwnUploadParams{
			ID: id, Owner: owner, LeaseUs: lease.Microseconds(), PackageID: who.PackageID,
			UploadedBy: string(who.UploadedBy), CreatorUserID: who.CreatorUserID, LinkHash: who.LinkHash,
		})
	}
	if err != nil {
		err = sqldb.NotFound(err, "upload")
		if errors.Is(err, app.ErrNotFound) {
			// No row: another lease runs, or the upload is gone or not who's.
			if u, getErr := s.GetUpload(ctx, id); getErr == nil && (who == nil || who.Owns(u)) {
				return transfers.TusUpload{}, transfers.ErrUploadLocked
			}
		}
		return transfers.TusUpload{}, err
	}
	return toUpload(row)
}

// AskRelease marks the ask to let go in the upload's row and notifies it to the
// holder's gateway (FollowUploadReleases); ok is false when no lease runs.
func (s *Store) AskRelease(ctx context.Context, id uuid.UUID) (uuid.UUID, bool, error) {
	row, err := s.q.AskUploadRelease(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, false, nil
	}
	if err != nil {
		return uuid.Nil, false, err
	}
	return row.Holder, true, nil
}

// RenewLease extends owner's lease and says whether it was asked to let go;
// ErrUploadLocked when owner holds no lease any more.
func (s *Store) RenewLease(ctx context.Context, id, owner uuid.UUID, lease time.Duration) (bool, error) {
	asked, err := s.q.RenewUploadLease(ctx, RenewUploadLeaseParams{ID: id, Owner: owner, LeaseUs: lease.Microseconds()})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, transfers.ErrUploadLocked
	}
	return asked, err
}

// SaveUpload stores where the upload stands and renews owner's lease, or gives it back
// when release is set.
func (s *Store) SaveUpload(ctx context.Context, u transfers.TusUpload, owner uuid.UUID, lease time.Duration, release bool) error {
	parts, err := json.Marshal(partsOrEmpty(u.Parts))
	if err != nil {
		return err
	}
	n, err := s.q.SaveUpload(ctx, SaveUploadParams{
		ID: u.ID, Owner: owner, UploadOffset: u.Offset, S3UploadID: u.S3UploadID, Parts: parts, TailKey: u.TailKey,
		TailSize: u.TailSize, Sha256State: u.SHA256State, ExpiresAt: u.ExpiresAt, LeaseUs: lease.Microseconds(),
		Release: release,
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return transfers.ErrUploadLocked
	}
	return nil
}

// UnlockUpload gives up owner's lease.
func (s *Store) UnlockUpload(ctx context.Context, id, owner uuid.UUID) error {
	return s.q.UnlockUpload(ctx, UnlockUploadParams{ID: id, Owner: owner})
}

// CompleteUpload records the file in its package's transaction (as AddFile does) and
// marks the upload complete in the same transaction.
func (s *Store) CompleteUpload(ctx context.Context, u transfers.TusUpload, owner uuid.UUID, f app.File, change func(p *app.Package) (app.Effects, error)) (app.Package, error) {
	parts, err := json.Marshal(partsOrEmpty(u.Parts))
	if err != nil {
		return app.Package{}, err
	}
	return s.packages.AddFileTx(ctx, f, change, func(tx pgx.Tx) error {
		n, err := s.q.WithTx(tx).CompleteUpload(ctx, CompleteUploadParams{ID: u.ID, Owner: owner, S3UploadID: u.S3UploadID, Parts: parts})
		if err != nil {
			return err
		}
		if n == 0 {
			return transfers.ErrUploadLocked
		}
		return nil
	})
}

// DeleteUpload forgets an upload.
func (s *Store) DeleteUpload(ctx context.Context, id uuid.UUID) error {
	return s.q.DeleteUpload(ctx, id)
}

// UploadsToEnd lists uploads no PATCH holds that are past their expiry, or whose
// package is gone, overdue, or in a state that takes no uploads of their kind.
func (s *Store) UploadsToEnd(ctx context.Context, limit int) ([]transfers.TusUpload, error) {
	rows, err := s.q.UploadsToEnd(ctx, int32(min(limit, math.MaxInt32)))
	if err != nil {
		return nil, err
	}
	out := make([]transfers.TusUpload, 0, len(rows))
	for _, r := range rows {
		u, err := toUpload(r.TusUpload)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// PackageUploads lists a package's uploads.
func (s *Store) PackageUploads(ctx context.Context, packageID uuid.UUID) ([]transfers.TusUpload, error) {
	rows, err := s.q.PackageUploads(ctx, packageID)
	if err != nil {
		return nil, err
	}
	out := make([]transfers.TusUpload, 0, len(rows))
	for _, r := range rows {
		u, err := toUpload(r)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// OpenUploads counts a package's unfinished uploads, not past their expiry.
func (s *Store) OpenUploads(ctx context.Context, packageID uuid.UUID) (int, error) {
	n, err := s.q.CountPackageOpenUploads(ctx, packageID)
	return int(n), err
}

// FileExists reports whether a file row with that id exists.
func (s *Store) FileExists(ctx context.Context, id uuid.UUID) (bool, error) {
	return s.q.FileExists(ctx, id)
}

// KnownMultipart returns which of the multipart upload ids an upload row names.
func (s *Store) KnownMultipart(ctx context.Context, ids []string) (map[string]bool, error) {
	known, err := s.q.KnownMultipart(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(known))
	for _, id := range known {
		out[id] = true
	}
	return out, nil
}

func partsOrEmpty(p []transfers.TusPart) []transfers.TusPart {
	if p == nil {
		return []transfers.TusPart{}
	}
	return p
}
