package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// The state of resumable uploads (tus). The SQL is written by hand here rather than
// in queries.sql: sqlc cannot be built on this machine (its parser needs cgo and
// libpg_query); it is plain, static SQL that `make generate` can take over.

var _ app.TusStore = (*Postgres)(nil)

const tusColumns = `id, package_id, uploaded_by, creator_user_id, link_hash, file_id, filename, content_type,
	length, "offset", object_key, s3_upload_id, parts, tail_key, tail_size, sha256_state, file_completed,
	created_at, expires_at`

func scanUpload(row pgx.Row) (app.TusUpload, error) {
	var (
		u     app.TusUpload
		by    string
		parts []byte
	)
	err := row.Scan(&u.ID, &u.PackageID, &by, &u.CreatorUserID, &u.LinkHash, &u.FileID, &u.Filename, &u.ContentType,
		&u.Length, &u.Offset, &u.ObjectKey, &u.S3UploadID, &parts, &u.TailKey, &u.TailSize, &u.SHA256State,
		&u.Completed, &u.CreatedAt, &u.ExpiresAt)
	if err != nil {
		return app.TusUpload{}, notFound(err, "upload")
	}
	u.UploadedBy = app.Uploader(by)
	if err := json.Unmarshal(parts, &u.Parts); err != nil {
		return app.TusUpload{}, fmt.Errorf("upload %s: parts: %w", u.ID, err)
	}
	return u, nil
}

// CreateUpload inserts a new upload.
func (s *Postgres) CreateUpload(ctx context.Context, u app.TusUpload) error {
	parts, err := json.Marshal(partsOrEmpty(u.Parts))
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO tus_uploads (`+tusColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`,
		u.ID, u.PackageID, string(u.UploadedBy), u.CreatorUserID, u.LinkHash, u.FileID, u.Filename, u.ContentType,
		u.Length, u.Offset, u.ObjectKey, u.S3UploadID, parts, u.TailKey, u.TailSize, u.SHA256State, u.Completed,
		u.CreatedAt, u.ExpiresAt)
	return err
}

// GetUpload returns an upload by id.
func (s *Postgres) GetUpload(ctx context.Context, id uuid.UUID) (app.TusUpload, error) {
	return scanUpload(s.pool.QueryRow(ctx, `SELECT `+tusColumns+` FROM tus_uploads WHERE id = $1`, id))
}

// LockUpload takes the upload's lease for owner when no other lease runs.
func (s *Postgres) LockUpload(ctx context.Context, id, owner uuid.UUID, lease time.Duration) (app.TusUpload, error) {
	u, err := scanUpload(s.pool.QueryRow(ctx, `UPDATE tus_uploads
		SET lock_owner = $2, lock_until = now() + $3 * interval '1 microsecond'
		WHERE id = $1 AND (lock_owner IS NULL OR lock_until < now() OR lock_owner = $2)
		RETURNING `+tusColumns, id, owner, lease.Microseconds()))
	if errors.Is(err, app.ErrNotFound) {
		if _, getErr := s.GetUpload(ctx, id); getErr == nil {
			return app.TusUpload{}, app.ErrUploadLocked
		}
	}
	return u, err
}

// RenewLease extends owner's lease.
func (s *Postgres) RenewLease(ctx context.Context, id, owner uuid.UUID, lease time.Duration) error {
	_, err := s.pool.Exec(ctx, `UPDATE tus_uploads SET lock_until = now() + $3 * interval '1 microsecond'
		WHERE id = $1 AND lock_owner = $2`, id, owner, lease.Microseconds())
	return err
}

// SaveUpload stores where the upload stands and renews owner's lease, or gives it back
// when release is set.
func (s *Postgres) SaveUpload(ctx context.Context, u app.TusUpload, owner uuid.UUID, lease time.Duration, release bool) error {
	parts, err := json.Marshal(partsOrEmpty(u.Parts))
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tus_uploads
		SET "offset" = $3, s3_upload_id = $4, parts = $5, tail_key = $6, tail_size = $7, sha256_state = $8,
			expires_at = $9,
			lock_owner = CASE WHEN $11 THEN NULL ELSE lock_owner END,
			lock_until = CASE WHEN $11 THEN NULL ELSE now() + $10 * interval '1 microsecond' END
		WHERE id = $1 AND lock_owner = $2`,
		u.ID, owner, u.Offset, u.S3UploadID, parts, u.TailKey, u.TailSize, u.SHA256State, u.ExpiresAt, lease.Microseconds(), release)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return app.ErrUploadLocked
	}
	return nil
}

// UnlockUpload gives up owner's lease.
func (s *Postgres) UnlockUpload(ctx context.Context, id, owner uuid.UUID) error {
	_, err := s.pool.Exec(ctx, `UPDATE tus_uploads SET lock_owner = NULL, lock_until = NULL
		WHERE id = $1 AND lock_owner = $2`, id, owner)
	return err
}

// CompleteUpload records the file in its package's transaction (as AddFile does) and
// marks the upload complete in the same transaction.
func (s *Postgres) CompleteUpload(ctx context.Context, u app.TusUpload, owner uuid.UUID, f app.File, change func(p *app.Package) (app.Effects, error)) (app.Package, error) {
	var out app.Package
	parts, err := json.Marshal(partsOrEmpty(u.Parts))
	if err != nil {
		return out, err
	}
	err = s.withLocked(ctx, f.PackageID, func(q *Queries, p *app.Package) (app.Effects, error) {
		fx, err := change(p)
		if err != nil {
			return fx, err
		}
		tag, err := q.db.Exec(ctx, `UPDATE tus_uploads
			SET file_completed = true, "offset" = length, s3_upload_id = $3, parts = $4, tail_key = '', tail_size = 0,
				lock_owner = NULL, lock_until = NULL
			WHERE id = $1 AND lock_owner = $2 AND NOT file_completed`, u.ID, owner, u.S3UploadID, parts)
		if err != nil {
			return fx, err
		}
		if tag.RowsAffected() == 0 {
			return fx, app.ErrUploadLocked
		}
		if err := addFileRow(ctx, q, f); err != nil {
			return fx, err
		}
		out = *p
		return fx, save(ctx, q, *p)
	})
	return out, err
}

// DeleteUpload forgets an upload.
func (s *Postgres) DeleteUpload(ctx context.Context, id uuid.UUID) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM tus_uploads WHERE id = $1`, id)
	return err
}

// UploadsToEnd lists uploads no PATCH holds that are past their expiry, or whose
// package is gone, overdue, or in a state that takes no uploads of their kind.
func (s *Postgres) UploadsToEnd(ctx context.Context, limit int) ([]app.TusUpload, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+prefixed("u.", tusColumns)+` FROM tus_uploads u
		LEFT JOIN packages p ON p.id = u.package_id
		WHERE (u.lock_owner IS NULL OR u.lock_until < now())
		  AND (u.expires_at <= now()
		    OR (NOT u.file_completed AND (p.id IS NULL OR p.expires_at <= now()
		      OR (u.uploaded_by = 'owner' AND p.state <> 'draft')
		      OR (u.uploaded_by = 'recipient' AND (p.state <> 'active' OR p.link_hash IS DISTINCT FROM u.link_hash)))))
		ORDER BY u.expires_at
		LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (app.TusUpload, error) { return scanUpload(r) })
}

// PackageUploads lists a package's uploads.
func (s *Postgres) PackageUploads(ctx context.Context, packageID uuid.UUID) ([]app.TusUpload, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tusColumns+` FROM tus_uploads WHERE package_id = $1`, packageID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (app.TusUpload, error) { return scanUpload(r) })
}

// FileExists reports whether a file row with that id exists.
func (s *Postgres) FileExists(ctx context.Context, id uuid.UUID) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM files WHERE id = $1)`, id).Scan(&ok)
	return ok, err
}

// KnownMultipart returns which of the multipart upload ids an upload row names.
func (s *Postgres) KnownMultipart(ctx context.Context, ids []string) (map[string]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT s3_upload_id FROM tus_uploads WHERE s3_upload_id = ANY($1::text[])`, ids)
	if err != nil {
		return nil, err
	}
	known, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(known))
	for _, id := range known {
		out[id] = true
	}
	return out, nil
}

func partsOrEmpty(p []app.TusPart) []app.TusPart {
	if p == nil {
		return []app.TusPart{}
	}
	return p
}

// prefixed qualifies every column of a column list with a table alias.
func prefixed(alias, columns string) string {
	out := ""
	start := 0
	for i := 0; i <= len(columns); i++ {
		if i == len(columns) || columns[i] == ',' {
			col := columns[start:i]
			j := 0
			for j < len(col) && (col[j] == ' ' || col[j] == '\n' || col[j] == '\t') {
				j++
			}
			if out != "" {
				out += ", "
			}
			out += alias + col[j:]
			start = i + 1
		}
	}
	return out
}
