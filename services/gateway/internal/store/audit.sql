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
