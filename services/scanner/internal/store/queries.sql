-- The scanner's statements (sqlc, compiled against the gateway's migrations, which own
-- the schema): a file and its package head, the verdict written once, its effects.

-- name: GetFile :one
-- The head of package.file_infected is read off the package's whole row
-- (events.PackageHeadFromRow).
SELECT f.id, f.package_id, f.filename, f.size, f.object_key, f.scan, f.scan_attempts,
       to_jsonb(p) AS head
FROM files f JOIN packages p ON p.id = f.package_id
WHERE f.id = @file_id;

-- name: RecordVerdict :one
-- The one verdict of a file: only a pending file takes one, so a redelivered event,
-- or a second instance that scanned the same file, records nothing.
UPDATE files SET scan = @scan, scan_signature = @signature, scanned_at = now()
WHERE id = @file_id AND scan = 'pending'
RETURNING id;

-- name: CountFailure :one
-- A failed attempt of a pending file (clamd answered an error, the object could not be
-- read); 0 rows when the file has a verdict or is gone.
UPDATE files SET scan_attempts = scan_attempts + 1
WHERE id = @file_id AND scan = 'pending'
RETURNING scan_attempts;

-- name: InsertAudit :exec
INSERT INTO audit_log (actor, action, package_id, file_id, detail)
VALUES ('system', @action, @package_id, @file_id, @detail);

-- name: InsertInfectedNotification :exec
-- The owner's e-mail about the file, sent by the mailer with the other owner
-- notifications (one per file).
INSERT INTO owner_notifications (package_id, kind, state, due_at, file_id, filename, signature)
VALUES (@package_id, 'infected', 'pending', now(), @file_id, @filename, @signature)
ON CONFLICT (file_id) WHERE kind = 'infected' DO NOTHING;
