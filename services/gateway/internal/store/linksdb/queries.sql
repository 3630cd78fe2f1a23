-- The links domain's statements (app/links): the package and recipient a magic link
-- opens, the link's uses, the download budgets of files through a link (link_budgets),
-- the throttle of a protected link's unlock (link_unlock_failures) and the per-client
-- request rates of the anonymous routes (link_rate). The files as a link sees them
-- (ListFiles, GetFile) are the package store's statements, in ../queries.sql.

-- name: PackageByLink :one
-- The package and the recipient whose link hashes to $1 (00019: one link per
-- recipient). used_up: the package has a download limit and every file the recipient
-- may download (an outbound package's) has spent its budget through this link
-- (link_budgets, 00013).
SELECT sqlc.embed(packages), sqlc.embed(r),
       (packages.direction = 'outbound' AND packages.max_downloads IS NOT NULL AND packages.file_count > 0
        AND NOT EXISTS (SELECT 1 FROM files f
                        LEFT JOIN link_budgets b ON b.file_id = f.id AND b.link_hash = r.link_hash
                        WHERE f.package_id = packages.id
                          AND coalesce(b.taken, 0) < packages.max_downloads::bigint * GREATEST(f.size, 1)))::boolean AS used_up
FROM recipients r JOIN packages ON packages.id = r.package_id
WHERE r.link_hash = $1;

-- name: UseLink :exec
UPDATE recipients SET use_count = use_count + 1, last_used_at = now() WHERE link_hash = @link_hash::bytea;

-- name: EnsureLinkBudgets :exec
-- Makes the budget rows of files through a link, so TakeLinkBytes has a row to lock.
INSERT INTO link_budgets (file_id, link_hash)
SELECT unnest(@file_ids::uuid[]), @link_hash::bytea
ON CONFLICT DO NOTHING;

-- name: TakeLinkBytes :many
-- Takes what answers through a link will send from each file's budget there
-- (max_downloads × size, an empty file max_downloads × 1; no limit: no budget, but the
-- bytes are still recorded, so a limit set later counts them): a file is taken only
-- when its budget is not spent and holds all it asks for. One conditional UPDATE:
-- PostgreSQL serialises it on each budget row and checks the condition again on the
-- row it locked, so concurrent answers on any number of gateways never take past the
-- budget. Each file taken with counted set also counts one download (an answer from
-- byte 0): in the file's total, in the link's count of it and in the recipient's.
-- (The link's count is set by the same UPDATE that takes the bytes: a statement
-- updates a row once.) The files returned are the ones taken.
WITH want AS (
    SELECT w.file_id, (@costs::bigint[])[w.n] AS cost FROM unnest(@file_ids::uuid[]) WITH ORDINALITY AS w (file_id, n)
), taken AS (
    UPDATE link_budgets b SET taken = b.taken + want.cost,
        download_count = b.download_count + CASE WHEN @counted::boolean THEN 1 ELSE 0 END
    FROM want, files f, packages p
    WHERE b.file_id = want.file_id AND b.link_hash = @link_hash::bytea
      AND f.id = b.file_id AND f.package_id = @package_id AND p.id = f.package_id
      AND (p.max_downloads IS NULL
           OR (b.taken < p.max_downloads::bigint * GREATEST(f.size, 1)
               AND b.taken + want.cost <= p.max_downloads::bigint * GREATEST(f.size, 1)))
    RETURNING b.file_id
)
, counted AS (
    UPDATE files SET download_count = files.download_count + 1
    FROM taken WHERE files.id = taken.file_id AND @counted::boolean
)
, recipient_counted AS (
    UPDATE recipients SET download_count = recipients.download_count + (SELECT count(*) FROM taken)
    WHERE recipients.link_hash = @link_hash::bytea AND @counted::boolean AND EXISTS (SELECT 1 FROM taken)
)
SELECT taken.file_id FROM taken;

-- name: ReturnLinkBytes :exec
-- Gives back what answers through a link took and did not send.
UPDATE link_budgets b SET taken = GREATEST(b.taken - (@amounts::bigint[])[r.n], 0)
FROM unnest(@file_ids::uuid[]) WITH ORDINALITY AS r (file_id, n)
WHERE b.file_id = r.file_id AND b.link_hash = @link_hash::bytea;

-- name: UnlockFailures :many
-- The link's wrong passwords within the window recorded before an attempt, newest first.
SELECT failed_at FROM link_unlock_failures
WHERE recipient_id = @recipient_id AND failed_at > @since AND id < @before_id
ORDER BY failed_at DESC;

-- name: LockUnlockAttempts :exec
-- Serialises the unlock attempts of one link, on every gateway, until the transaction
-- ends (a transaction-level advisory lock keyed by the link's recipient).
SELECT pg_advisory_xact_lock(hashtextextended('link-unlock:' || @recipient_id::text, 0));

-- name: InsertUnlockFailure :one
-- An unlock attempt at the database's time once the link's lock is held (not the
-- transaction's start, which came before the wait): every gateway counts on one clock.
INSERT INTO link_unlock_failures (package_id, recipient_id, failed_at) VALUES (@package_id, @recipient_id, clock_timestamp()) RETURNING id, failed_at;

-- name: ForgetOldUnlockFailures :exec
-- Wrong passwords older than the window count no more.
DELETE FROM link_unlock_failures WHERE recipient_id = @recipient_id AND failed_at <= @since;

-- name: DeleteUnlockFailure :exec
DELETE FROM link_unlock_failures WHERE id = $1;

-- name: TakeLinkRate :one
-- One GCRA step in one statement (migration 00009): a client's theoretical arrival
-- time (tat) moves on by one emission interval from max(tat, now) when that stays
-- within the burst tolerance of now; otherwise the row is left alone and the statement
-- reports how long until it would fit, in seconds. Durations are in microseconds.
WITH cur AS (
    SELECT greatest(link_rate.tat, clock_timestamp()) AS base FROM link_rate WHERE link_rate.client = @client
), up AS (
    INSERT INTO link_rate AS r (client, tat) VALUES (@client, clock_timestamp() + (sqlc.arg(interval_us)::bigint * interval '1 microsecond'))
    ON CONFLICT (client) DO UPDATE
        SET tat = greatest(r.tat, clock_timestamp()) + (sqlc.arg(interval_us)::bigint * interval '1 microsecond')
        WHERE greatest(r.tat, clock_timestamp()) + (sqlc.arg(interval_us)::bigint * interval '1 microsecond') - clock_timestamp() <= (sqlc.arg(tolerance_us)::bigint * interval '1 microsecond')
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM up) AS taken,
       coalesce((SELECT extract(epoch FROM cur.base + (sqlc.arg(interval_us)::bigint * interval '1 microsecond') - (sqlc.arg(tolerance_us)::bigint * interval '1 microsecond') - clock_timestamp()) FROM cur), 0)::float8 AS wait_secs;

-- name: SweepLinkRates :exec
-- Forgets the buckets that have been full again for @idle_us microseconds.
DELETE FROM link_rate WHERE tat < clock_timestamp() - (sqlc.arg(idle_us)::bigint * interval '1 microsecond');
