-- The expiry service's SQL, compiled by sqlc (sqlc.yaml; make generate) against the
-- gateway's schema (services/gateway/migrations).

-- name: ExpireDue :many
-- Locks up to @max_rows packages overdue at @now (the expiry service's clock;
-- lifecycle.OverdueSQL, the rule every service shares: a test in package db holds the
-- two equal), oldest deadline first, skipping rows another transaction holds (another expiry instance, or a
-- gateway request changing the package: the next batch or tick sees it again), and
-- expires them. The state test is repeated on the locked row, so a package expired
-- meanwhile by another instance is never expired (nor announced) twice. A package
-- under a legal hold (on_hold) waits until the hold is released. It uses
-- packages_expiring_idx.
WITH due AS (
    SELECT o.id, o.state FROM packages o
    WHERE (o.state <> 'expired' AND o.expires_at <= @now) AND NOT o.on_hold
    ORDER BY o.expires_at
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED
)
UPDATE packages p SET state = 'expired'
FROM due
WHERE p.id = due.id AND p.state <> 'expired'
-- The head of the package's events is read off its whole row (events.PackageHeadFromRow).
RETURNING p.id, to_jsonb(p) AS head, due.state AS previous_state, p.expires_at;

-- name: QueueFileObjects :many
-- Queues the objects of the packages' files for deletion and returns each file's
-- package and key. The file rows stay: the owner still sees what was sent.
WITH keys AS (
    SELECT files.package_id, files.object_key FROM files WHERE files.package_id = ANY(@package_ids::uuid[])
), queued AS (
    INSERT INTO object_deletions (object_key) SELECT keys.object_key FROM keys ON CONFLICT DO NOTHING
)
SELECT keys.package_id, keys.object_key FROM keys ORDER BY keys.package_id, keys.object_key;

-- name: InsertAudit :exec
-- Writes system audit entries, one per (action, package) pair, in the order given.
INSERT INTO audit_log (actor, action, package_id)
SELECT 'system', a.action, (@package_ids::uuid[])[a.n]
FROM unnest(@actions::text[]) WITH ORDINALITY AS a (action, n)
ORDER BY a.n;

-- name: LockDeletions :many
-- Locks up to @max_rows queued object keys, oldest first, skipping keys another sweep
-- (or a gateway forgetting a key it removed) holds.
SELECT object_key FROM object_deletions
ORDER BY created_at, object_key
LIMIT @max_rows
FOR UPDATE SKIP LOCKED;

-- name: ForgetDeletions :execrows
-- Forgets keys whose objects are gone.
DELETE FROM object_deletions WHERE object_key = ANY(@keys::text[]);

-- name: OverdueLag :one
-- The age at @now (the expiry service's clock) of the oldest package overdue at @now
-- (lifecycle.OverdueSQL), not expired yet and not under a legal hold, in seconds (0
-- when none); it uses packages_expiring_idx.
-- (sqlc.arg, as "@now::timestamptz - x" reads to sqlc as the operator @.)
SELECT coalesce(extract(epoch FROM sqlc.arg(now)::timestamptz - min(expires_at)), 0)::float8 AS secs
FROM packages WHERE (state <> 'expired' AND expires_at <= sqlc.arg(now)) AND NOT on_hold;

-- name: PendingDeletions :one
-- Counts queued object keys.
SELECT count(*) FROM object_deletions;

-- name: LockOrphans :many
-- Locks up to @max_rows object key reservations older than @grace_secs by the
-- database's clock, oldest first, skipping keys a gateway committing the key's file
-- row (or another sweep) holds, and says of each whether its file row exists. It uses
-- object_reservations_age_idx and the unique index of files.object_key.
SELECT r.object_key, EXISTS (SELECT 1 FROM files f WHERE f.object_key = r.object_key) AS committed
FROM object_reservations r
WHERE r.reserved_at < now() - make_interval(secs => @grace_secs::float8)
ORDER BY r.reserved_at, r.object_key
LIMIT @max_rows
FOR UPDATE OF r SKIP LOCKED;

-- name: ForgetReservations :exec
-- Forgets reservations whose objects are gone or committed.
DELETE FROM object_reservations WHERE object_key = ANY(@keys::text[]);

-- name: RemoveOldAudit :one
-- Removes up to @max_rows audit entries older than @retention_secs by the database's
-- clock (SHIPFILE_AUDIT_RETENTION): the front of the audit chain in seq order, up to
-- the first younger or legally held entry, keeping the last one's hash as the chain's
-- anchor (audit_remove_before, migration 00033_audit_chain.sql).
SELECT audit_remove_before(now() - make_interval(secs => @retention_secs::float8), @max_rows::int)::int AS removed;

-- name: ClaimAuditCheckpoint :one
-- Claims the next audit.checkpoint when @every_secs have passed since the last one (the
-- instance whose update moves audit_checkpoints.at writes it; the others get no row),
-- and returns the audit chain's head and anchor as committed.
WITH claimed AS (
    UPDATE audit_checkpoints SET at = now()
    WHERE at <= now() - make_interval(secs => @every_secs::float8)
    RETURNING at
)
SELECT c.at, h.seq AS head_seq, h.hash AS head_hash, a.seq AS anchor_seq, a.hash AS anchor_hash
FROM claimed c, audit_chain_head h, audit_chain_anchor a;
