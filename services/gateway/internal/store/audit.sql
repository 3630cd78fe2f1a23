-- The audit chain (migration 00033_audit_chain.sql): its head and anchor, its entries
-- in seq order for verification and export. Entries are written by the trigger
-- audit_chain_link, whoever inserts into audit_log.

-- name: AuditChainHead :one
SELECT seq, hash FROM audit_chain_head;

-- name: AuditChainAnchor :one
SELECT seq, hash FROM audit_chain_anchor;

-- name: ListAuditChain :many
-- The chained entries after @after_seq up to @upto_seq, in seq order (keyset pages).
SELECT seq::bigint AS seq, created_at, actor, actor_user_id, action, package_id, file_id, recipient_id,
       ip, user_agent, detail, prev_hash::text AS prev_hash, hash::text AS hash
FROM audit_log
WHERE seq > @after_seq::bigint AND seq <= @upto_seq::bigint
ORDER BY seq
LIMIT @max_rows;

-- name: AuditSeqRange :one
-- The chained entries written in [@from_at, @to_at): the first and last seq (0, 0 when
-- none). Between the two every entry is exported, so an export is one stretch of the
-- chain even where a transaction's time and its place in the chain differ.
SELECT coalesce(min(seq), 0)::bigint AS first_seq, coalesce(max(seq), 0)::bigint AS last_seq
FROM audit_log
WHERE seq IS NOT NULL AND created_at >= @from_at AND created_at < @to_at;

-- name: AuditCanonical :many
-- What the database's own functions make of the entries in [@first_seq, @last_seq]:
-- their canonical JSON and hash, for tests that hold the Go functions to them.
SELECT seq::bigint AS seq, audit_canonical(a.*)::text AS canonical, audit_hash(a.*)::text AS hash
FROM audit_log a
WHERE seq BETWEEN @first_seq::bigint AND @last_seq::bigint
ORDER BY seq;

-- name: InsertLegalHold :execrows
-- Places a hold on a package or user that exists (0 rows: neither does).
INSERT INTO legal_holds (id, package_id, user_id, reason, created_by, created_at)
SELECT @id, sqlc.narg(package_id)::uuid, sqlc.narg(user_id)::bigint, @reason, @created_by, @created_at
WHERE EXISTS (SELECT 1 FROM packages WHERE id = sqlc.narg(package_id)::uuid)
   OR EXISTS (SELECT 1 FROM users WHERE id = sqlc.narg(user_id)::bigint);

-- name: ListLegalHolds :many
SELECT * FROM legal_holds ORDER BY created_at DESC, id DESC;

-- name: GetLegalHoldForUpdate :one
SELECT * FROM legal_holds WHERE id = $1 FOR UPDATE;

-- name: ReleaseLegalHold :one
UPDATE legal_holds SET released_by = @released_by, released_at = @released_at
WHERE id = @id AND released_at IS NULL
RETURNING *;

-- name: HoldObjectKeys :many
-- The objects of the packages the hold covers that are (@held true) or are no longer
-- (@held false) under any hold.
SELECT f.object_key FROM files f JOIN packages p ON p.id = f.package_id
WHERE (p.id = sqlc.narg(package_id)::uuid OR p.owner_user_id = sqlc.narg(user_id)::bigint)
  AND p.on_hold = @held::boolean
ORDER BY f.object_key;
