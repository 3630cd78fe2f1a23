-- Image previews (internal/app/previews).

-- name: PreviewSource :one
-- A file and what decides whether it gets a preview.
SELECT f.id, f.object_key, f.size, f.scan, (f.encrypted OR p.encryption <> 'none')::bool AS encrypted,
       p.state, coalesce(f.preview_key, '')::text AS preview_key
FROM files f JOIN packages p ON p.id = f.package_id
WHERE f.id = @id;

-- name: LockPackageOfFile :one
-- Holds the package of a file against deletion, state changes (expiry) and legal holds
-- placed or released until the transaction ends, and returns its state and whether a
-- hold covers it.
SELECT p.state, p.on_hold FROM packages p JOIN files f ON f.package_id = p.id
WHERE f.id = @id
FOR SHARE OF p;

-- name: SetPreview :execrows
UPDATE files SET preview_key = @preview_key, preview_width = @width, preview_height = @height
WHERE id = @id;
