-- Resumable uploads (tus): table tus_uploads (migration 00011). Durations are in
-- microseconds.

-- name: CreateUpload :exec
INSERT INTO tus_uploads (id, package_id, uploaded_by, creator_user_id, link_hash, file_id, filename, content_type,
                         length, "offset", object_key, s3_upload_id, parts, tail_key, tail_size, sha256_state,
                         file_completed, created_at, expires_at)
VALUES (@id, @package_id, @uploaded_by, @creator_user_id, @link_hash, @file_id, @filename, @content_type,
        @length, @upload_offset, @object_key, @s3_upload_id, @parts, @tail_key, @tail_size, @sha256_state,
        @file_completed, @created_at, @expires_at);

-- name: GetUpload :one
SELECT * FROM tus_uploads WHERE id = $1;

-- name: LockUpload :one
-- Takes the upload's lease for @owner when no other lease runs; no row when another
-- runs (or the upload is gone).
UPDATE tus_uploads
SET lock_owner = @owner::uuid, lock_until = now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond'
WHERE id = @id AND (lock_owner IS NULL OR lock_until < now() OR lock_owner = @owner::uuid)
RETURNING *;

-- name: RenewUploadLease :exec
UPDATE tus_uploads SET lock_until = now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond'
WHERE id = @id AND lock_owner = @owner::uuid;

-- name: SaveUpload :execrows
-- Stores where the upload stands and renews @owner's lease, or gives it back when
-- @release; no row when @owner holds no lease.
UPDATE tus_uploads
SET "offset" = @upload_offset, s3_upload_id = @s3_upload_id, parts = @parts, tail_key = @tail_key, tail_size = @tail_size,
    sha256_state = @sha256_state, expires_at = @expires_at,
    lock_owner = CASE WHEN @release::boolean THEN NULL ELSE lock_owner END,
    lock_until = CASE WHEN @release::boolean THEN NULL ELSE now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond' END
WHERE id = @id AND lock_owner = @owner::uuid;

-- name: UnlockUpload :exec
UPDATE tus_uploads SET lock_owner = NULL, lock_until = NULL
WHERE id = @id AND lock_owner = @owner::uuid;

-- name: CompleteUpload :execrows
-- Marks the upload complete and gives back @owner's lease; no row when @owner holds
-- no lease or it is complete already.
UPDATE tus_uploads
SET file_completed = true, "offset" = length, s3_upload_id = @s3_upload_id, parts = @parts, tail_key = '', tail_size = 0,
    lock_owner = NULL, lock_until = NULL
WHERE id = @id AND lock_owner = @owner::uuid AND NOT file_completed;

-- name: DeleteUpload :exec
DELETE FROM tus_uploads WHERE id = $1;

-- name: UploadsToEnd :many
-- Uploads no PATCH holds that are past their expiry, or whose package is gone,
-- overdue, or in a state that takes no uploads of their kind.
SELECT sqlc.embed(u) FROM tus_uploads u
LEFT JOIN packages p ON p.id = u.package_id
WHERE (u.lock_owner IS NULL OR u.lock_until < now())
  AND (u.expires_at <= now()
    OR (NOT u.file_completed AND (p.id IS NULL OR p.expires_at <= now()
      OR (u.uploaded_by = 'owner' AND p.state <> 'draft')
      OR (u.uploaded_by = 'recipient' AND (p.state <> 'active' OR p.link_hash IS DISTINCT FROM u.link_hash)))))
ORDER BY u.expires_at
LIMIT @max_rows;

-- name: PackageUploads :many
SELECT * FROM tus_uploads WHERE package_id = $1;

-- name: KnownMultipart :many
-- Which of the multipart upload ids an upload row names.
SELECT s3_upload_id FROM tus_uploads WHERE s3_upload_id = ANY(@ids::text[]);
