-- The malware scan's hold (migration 00028): in block mode a file the scanner could not
-- judge ('unscannable', or 'error' after the retries) is served only once the package's
-- owner (or an admin) has released it.

-- name: ReleaseFileScan :one
-- Records who released a held file and when; no row when the file is not (or no
-- longer) unscannable or failed.
UPDATE files SET scan_released_by = @released_by, scan_released_at = now()
WHERE package_id = @package_id AND id = @id AND scan IN ('unscannable', 'error')
RETURNING *;
