-- The audit chain (migration 00033_audit_chain.sql): its head and anchor, its entries
-- in seq order for verification and export. Entries are written by the trigger
-- audit_chain_link, whoever inserts into audit_log.

-- name: AuditChainHead :one
SELECT seq, hash FROM audit_chain_head;

-- name: AuditChainAnchor :one
SELECT seq, hash FROM audit_chain_anchor;

-- name: ListAuditChain :many
-- The chained entries after @after_seq up to @upto_seq, in seq order (keyset pages).
-- The chain reader bounds @upto_seq to one page of numbers past @after_seq, so a page
-- never reads a wider range than it returns, whatever the statistics of the table say.
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
-- The objects (each file's, and its preview's) of the packages the hold covers that are
-- (@held true) or are no longer (@held false) under any hold.
SELECT f.object_key FROM files f JOIN packages p ON p.id = f.package_id
WHERE (p.id = sqlc.narg(package_id)::uuid OR p.owner_user_id = sqlc.narg(user_id)::bigint)
  AND p.on_hold = @held::boolean
UNION ALL
SELECT f.preview_key FROM files f JOIN packages p ON p.id = f.package_id
WHERE (p.id = sqlc.narg(package_id)::uuid OR p.owner_user_id = sqlc.narg(user_id)::bigint)
  AND p.on_hold = @held::boolean AND f.preview_key IS NOT NULL
ORDER BY object_key;

-- name: ActivityReport :many
-- Per user, the packages created in [@from_at, @to_at) that still exist: outbound ones
-- sent and their bytes, inbound ones' bytes (received), their recipients' domains, and
-- the downloads of the user's packages in the range (audit entries).
WITH p AS (
    SELECT pk.id, pk.owner_user_id, pk.direction, pk.total_size FROM packages pk
    WHERE pk.created_at >= @from_at::timestamptz AND pk.created_at < @to_at::timestamptz
), sent AS (
    SELECT owner_user_id,
           count(*) FILTER (WHERE direction = 'outbound')::bigint AS packages_sent,
           coalesce(sum(total_size) FILTER (WHERE direction = 'outbound'), 0)::bigint AS bytes_sent,
           coalesce(sum(total_size) FILTER (WHERE direction = 'inbound'), 0)::bigint AS bytes_received
    FROM p GROUP BY owner_user_id
), dl AS (
    SELECT k.owner_user_id, count(*)::bigint AS downloads
    FROM audit_log a JOIN packages k ON k.id = a.package_id
    WHERE a.action IN ('file.download', 'archive.download') AND a.created_at >= @from_at::timestamptz AND a.created_at < @to_at::timestamptz
    GROUP BY k.owner_user_id
), dom AS (
    SELECT p.owner_user_id, array_agg(DISTINCT lower(split_part(r.email, '@', 2)))::text[] AS domains
    FROM p JOIN recipients r ON r.package_id = p.id
    WHERE p.direction = 'outbound'
    GROUP BY p.owner_user_id
)
SELECT u.id AS user_id, u.email, u.name,
       coalesce(s.packages_sent, 0)::bigint AS packages_sent,
       coalesce(s.bytes_sent, 0)::bigint AS bytes_sent,
       coalesce(s.bytes_received, 0)::bigint AS bytes_received,
       coalesce(dl.downloads, 0)::bigint AS downloads,
       coalesce(dom.domains, '{}')::text[] AS recipient_domains
FROM users u
LEFT JOIN sent s ON s.owner_user_id = u.id
LEFT JOIN dl ON dl.owner_user_id = u.id
LEFT JOIN dom ON dom.owner_user_id = u.id
WHERE s.owner_user_id IS NOT NULL OR dl.owner_user_id IS NOT NULL
ORDER BY u.email;
