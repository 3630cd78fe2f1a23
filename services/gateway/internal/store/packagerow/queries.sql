-- The statements of the packages row that name its columns or read it whole; every
-- other statement of packages, in any store package, selects packages.* or
-- sqlc.embed(packages), whose row converts to this package's Package.

-- name: InsertPackage :exec
INSERT INTO packages (id, owner_user_id, title, recipient_email, recipient_name, direction, state,
                      ttl_days, note, created_at, expires_at, password_hash, max_downloads, notify_owner, encryption,
                      public_key)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16);

-- name: GetPackage :one
SELECT * FROM packages WHERE id = $1;

-- name: LockPackage :one
SELECT * FROM packages WHERE id = $1 FOR UPDATE;

-- name: SavePackage :exec
UPDATE packages SET
    state           = $2,
    file_count      = $3,
    total_size      = $4,
    finalized_at    = $5,
    expires_at      = $6,
    revoked_at      = $7,
    title           = $8,
    note            = $9,
    recipient_name  = $10,
    password_hash   = $11,
    max_downloads   = $12,
    notify_owner    = $13,
    recipient_email = $14,
    file_seq        = $15
WHERE id = $1;
