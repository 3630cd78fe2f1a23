-- name: GetUser :one
-- A package's owner, read by the package service (packages.Store); the identity
-- domain's own statements on users are in identitydb/queries.sql.
SELECT * FROM users WHERE id = $1;

-- name: ListPackages :many
-- A page of packages, newest first, after the cursor (@after_created_at, @after_id);
-- a NULL filter selects every value.
SELECT * FROM packages
WHERE (sqlc.narg(owner_user_id)::bigint IS NULL OR owner_user_id = sqlc.narg(owner_user_id))
  AND (sqlc.narg(state)::text IS NULL OR state = sqlc.narg(state))
  AND (sqlc.narg(direction)::text IS NULL OR direction = sqlc.narg(direction))
  AND (sqlc.narg(after_created_at)::timestamptz IS NULL
       OR (created_at, id) < (sqlc.narg(after_created_at), sqlc.narg(after_id)::uuid))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(max_rows);

-- name: DeletePackageRow :exec
DELETE FROM packages WHERE id = $1;

-- name: ListRecipients :many
-- The recipients of packages, each package's in list order.
SELECT * FROM recipients WHERE package_id = ANY(@package_ids::uuid[]) ORDER BY package_id, position;

-- name: InsertRecipient :exec
-- Inserts a new package's recipient: a plain INSERT, where SaveRecipient's upsert would
-- make it a speculative insertion (one more WAL record and index probe a recipient).
INSERT INTO recipients (id, package_id, position, email, name, language, link_hash, link_state, created_at, revoked_at)
VALUES (@id, @package_id, @position, @email, @name, @language, @link_hash, @link_state, @created_at, @revoked_at);

-- name: SaveRecipient :exec
-- Inserts or updates a recipient as the package's change left it; the use counts
-- belong to the link routes and are never written here.
INSERT INTO recipients (id, package_id, position, email, name, language, link_hash, link_state, created_at, revoked_at)
VALUES (@id, @package_id, @position, @email, @name, @language, @link_hash, @link_state, @created_at, @revoked_at)
ON CONFLICT (id) DO UPDATE SET
    position   = excluded.position,
    email      = excluded.email,
    name       = excluded.name,
    language   = excluded.language,
    link_hash  = excluded.link_hash,
    link_state = excluded.link_state,
    revoked_at = excluded.revoked_at;

-- name: DeleteOtherRecipients :exec
-- Removes the recipients a draft's edit left out (they never had a link).
DELETE FROM recipients WHERE package_id = @package_id AND NOT (id = ANY(@keep::uuid[]));

-- name: ShiftRecipients :exec
-- Moves a package's recipients out of the way of new positions before they are saved
-- (position is unique per package).
UPDATE recipients SET position = position + 1000 WHERE package_id = @package_id;

-- name: InsertFile :exec
INSERT INTO files (id, package_id, filename, size, content_type, sha256, object_key, uploaded_by, created_at, recipient_id,
                   scan, encrypted, manifest)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13);

-- name: ListFiles :many
-- link_taken and link_downloads: what answers through the link @link_hash have taken
-- of the file's budget there, and its downloads through it (0 without a link: the
-- owner's view).
SELECT sqlc.embed(files), coalesce(b.taken, 0)::bigint AS link_taken, coalesce(b.download_count, 0)::int AS link_downloads
FROM files
LEFT JOIN link_budgets b ON b.file_id = files.id AND b.link_hash = sqlc.narg(link_hash)::bytea
WHERE files.package_id = @package_id ORDER BY files.created_at, files.id;

-- name: GetFile :one
SELECT sqlc.embed(files), coalesce(b.taken, 0)::bigint AS link_taken, coalesce(b.download_count, 0)::int AS link_downloads
FROM files
LEFT JOIN link_budgets b ON b.file_id = files.id AND b.link_hash = sqlc.narg(link_hash)::bytea
WHERE files.package_id = @package_id AND files.id = @id;

-- name: DeleteFileRow :exec
DELETE FROM files WHERE id = $1;

-- name: FileKeys :many
SELECT object_key FROM files WHERE package_id = $1;

-- name: ReserveObjectKey :exec
-- Records (or renews) an object key about to be written (migration 00010).
INSERT INTO object_reservations (object_key) VALUES (@object_key)
ON CONFLICT (object_key) DO UPDATE SET reserved_at = now();

-- name: ReleaseObjectKey :execrows
-- Forgets a key whose file row is being committed.
DELETE FROM object_reservations WHERE object_key = @object_key;

-- name: QueueObjectDeletion :exec
INSERT INTO object_deletions (object_key) SELECT unnest(@keys::text[]) ON CONFLICT DO NOTHING;

-- name: ObjectsDeleted :exec
DELETE FROM object_deletions WHERE object_key = ANY(@keys::text[]);

-- name: ListAudit :many
SELECT * FROM audit_log
WHERE (sqlc.narg(package_id)::uuid IS NULL OR package_id = sqlc.narg(package_id))
  AND (@before_id::bigint = 0 OR id < @before_id)
ORDER BY id DESC
LIMIT @max_rows;
