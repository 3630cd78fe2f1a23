-- Resumable uploads (tus): table tus_uploads (migrations 00011 and 00014). Durations
-- are in microseconds.

-- name: CreateUpload :exec
INSERT INTO tus_uploads (id, package_id, uploaded_by, creator_user_id, creator_token_id, link_hash, file_id, filename,
                         content_type, length, "offset", object_key, s3_upload_id, parts, tail_key, tail_size,
                         sha256_state, file_completed, created_at, expires_at, manifest)
VALUES (@id, @package_id, @uploaded_by, @creator_user_id, @creator_token_id, @link_hash, @file_id, @filename,
        @content_type, @length, @upload_offset, @object_key, @s3_upload_id, @parts, @tail_key, @tail_size,
        @sha256_state, @file_completed, @created_at, @expires_at, sqlc.narg(manifest)::bytea);

-- name: LockUploadCreator :exec
-- Serialises the creations of one creator (a token, a browser user or a link) until
-- the transaction ends, so its count of unfinished uploads holds.
SELECT pg_advisory_xact_lock(hashtextextended(@creator_key::text, 0));

-- name: CountPackageOpenUploads :one
-- A package's unfinished uploads, not past their expiry.
SELECT count(*) FROM tus_uploads WHERE package_id = @package_id AND NOT file_completed AND expires_at > now();

-- name: CountTokenOpenUploads :one
-- The unfinished uploads an API token created, not past their expiry.
SELECT count(*) FROM tus_uploads
WHERE creator_token_id = @token_id AND creator_token_id IS NOT NULL AND NOT file_completed AND expires_at > now();

-- name: CountSessionOpenUploads :one
-- The unfinished uploads a user created in the browser (no token), not past their expiry.
SELECT count(*) FROM tus_uploads
WHERE creator_user_id = @user_id AND creator_token_id IS NULL AND NOT file_completed AND expires_at > now();

-- name: CountLinkOpenUploads :one
-- The unfinished uploads created through a link, not past their expiry.
SELECT count(*) FROM tus_uploads
WHERE link_hash = @link_hash AND link_hash IS NOT NULL AND NOT file_completed AND expires_at > now();

-- name: GetUpload :one
-- An upload, and whether a running request holds its lease now.
SELECT sqlc.embed(tus_uploads), (lock_owner IS NOT NULL AND lock_until >= now())::boolean AS held
FROM tus_uploads WHERE id = $1;

-- name: LockUpload :one
-- Takes the upload's lease for @owner when no other lease runs; no row when another
-- runs (or the upload is gone). For the gateway's own work (sweep, ends): requests
-- of a client use LockOwnUpload.
UPDATE tus_uploads
SET lock_owner = @owner::uuid, lock_until = now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond',
    release_asked = NULL
WHERE id = @id AND (lock_owner IS NULL OR lock_until < now() OR lock_owner = @owner::uuid)
RETURNING *;

-- name: LockOwnUpload :one
-- LockUpload for a request of the upload's creator: only when the upload belongs to
-- that package, creator (user) or link, so a stranger's request takes no lease. No
-- row when another lease runs, the upload is gone or it is not theirs.
UPDATE tus_uploads
SET lock_owner = @owner::uuid, lock_until = now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond',
    release_asked = NULL
WHERE id = @id AND package_id = @package_id AND uploaded_by = @uploaded_by
  AND creator_user_id IS NOT DISTINCT FROM sqlc.narg(creator_user_id)::bigint
  AND link_hash IS NOT DISTINCT FROM sqlc.narg(link_hash)::bytea
  AND (lock_owner IS NULL OR lock_until < now() OR lock_owner = @owner::uuid)
RETURNING *;

-- name: RenewUploadLease :one
-- Extends @owner's lease and says whether another request asked it to let go; no row
-- when @owner holds no lease any more.
UPDATE tus_uploads SET lock_until = now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond'
WHERE id = @id AND lock_owner = @owner::uuid
RETURNING COALESCE(release_asked = @owner::uuid, false)::boolean AS asked;

-- name: AskUploadRelease :one
-- Asks the request that holds the upload's lease to let go: the ask is marked in the
-- row (read at the holder's next renewal) and notified on shipfile_tus_release with
-- the holder's lock_owner (heard by its gateway's listener at once). No row when no
-- lease runs.
WITH asked AS (
    UPDATE tus_uploads SET release_asked = lock_owner
    WHERE id = @id AND lock_owner IS NOT NULL AND lock_until >= now()
    RETURNING lock_owner
)
SELECT asked.lock_owner::uuid AS holder, pg_notify('shipfile_tus_release', asked.lock_owner::text)::text AS notified
FROM asked;

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
UPDATE tus_uploads SET lock_owner = NULL, lock_until = NULL, release_asked = NULL
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
      OR (u.uploaded_by = 'recipient' AND (p.state <> 'active' OR NOT EXISTS (
          SELECT 1 FROM recipients r WHERE r.link_hash = u.link_hash AND r.package_id = u.package_id AND r.link_state = 'active'))))))
ORDER BY u.expires_at
LIMIT @max_rows;

-- name: PackageUploads :many
SELECT * FROM tus_uploads WHERE package_id = $1;

-- name: KnownMultipart :many
-- Which of the multipart upload ids an upload row names.
SELECT s3_upload_id FROM tus_uploads WHERE s3_upload_id = ANY(@ids::text[]);

-- name: FileExists :one
-- Whether a file row with that id exists (an upload's file was recorded).
SELECT EXISTS (SELECT 1 FROM files WHERE id = $1);
