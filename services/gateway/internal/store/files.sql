-- Files of packages, beside queries.sql: the malware scan's hold and a package's
-- previews.

-- The malware scan's hold (migration 00028): in block mode a file the scanner could not
-- judge ('unscannable', or 'error' after the retries) is served only once the package's
-- owner (or an admin) has released it.

-- name: ReleaseFileScan :one
-- Records who released a held file and when; no row when the file is not (or no
-- longer) unscannable or failed.
UPDATE files SET scan_released_by = @released_by, scan_released_at = now()
WHERE package_id = @package_id AND id = @id AND scan IN ('unscannable', 'error')
RETURNING *;

-- name: PackagePreviewKeys :many
-- The preview keys of a package's files.
SELECT preview_key::text FROM files WHERE package_id = @package_id AND preview_key IS NOT NULL;
