-- Web UI sessions and the login throttle (migration 00006_web.sql).

-- name: InsertSession :exec
INSERT INTO web_sessions (id_hash, user_id, created_at, last_seen_at, expires_at, oidc_issuer, oidc_subject, oidc_refresh, oidc_check_at)
VALUES (@id_hash, @user_id, @created_at, @last_seen_at, @expires_at, sqlc.narg(oidc_issuer), sqlc.narg(oidc_subject), sqlc.narg(oidc_refresh), sqlc.narg(oidc_check_at));

-- name: SessionUser :one
SELECT sqlc.embed(s), sqlc.embed(u)
FROM web_sessions s
JOIN users u ON u.id = s.user_id
WHERE s.id_hash = $1;

-- name: TouchSession :exec
UPDATE web_sessions SET last_seen_at = $2, expires_at = $3 WHERE id_hash = $1;

-- name: DeleteSession :execrows
DELETE FROM web_sessions WHERE id_hash = $1;

-- name: DeleteUserSessions :exec
DELETE FROM web_sessions WHERE user_id = $1;

-- name: DeleteExpiredSessions :exec
DELETE FROM web_sessions WHERE expires_at <= $1;

-- name: CountLoginAttempt :one
-- Counts a sign-in attempt as a failure of every key in @keys before its password is
-- checked. A failure in a window that started before @window_start opens a new window.
-- The count and the lock are decided on the rows' old values, in one statement, so
-- concurrent attempts are all counted. It returns the highest count after it and the
-- latest lock in force before it (every part of a statement reads the rows as they
-- were before it).
WITH up AS (
    INSERT INTO login_throttle AS t (key, failures, window_start, locked_until)
    SELECT k, 1, @now::timestamptz, CASE WHEN 1 >= @max_failures::int THEN @lock_until::timestamptz END FROM unnest(@keys::text[]) AS k
    ON CONFLICT (key) DO UPDATE SET
        failures     = CASE WHEN t.window_start < @window_start::timestamptz THEN 1 ELSE t.failures + 1 END,
        window_start = CASE WHEN t.window_start < @window_start::timestamptz THEN @now::timestamptz ELSE t.window_start END,
        locked_until = CASE
            WHEN (CASE WHEN t.window_start < @window_start::timestamptz THEN 1 ELSE t.failures + 1 END) >= @max_failures::int
            THEN greatest(@lock_until::timestamptz, t.locked_until)
            ELSE t.locked_until
        END
    RETURNING t.key, t.failures
), lock AS (
    SELECT l.locked_until FROM login_throttle l
    WHERE l.key = ANY(@keys::text[]) AND l.locked_until > @now::timestamptz
    ORDER BY l.locked_until DESC
    LIMIT 1
)
SELECT f.failures, lock.locked_until
FROM (SELECT coalesce(max(up.failures), 0)::int AS failures FROM up) AS f
LEFT JOIN lock ON true;

-- name: RefundLoginAttempt :exec
-- Takes back one counted attempt of @key, lifting the lock when the count falls below
-- @max_failures again; a count that falls to zero is forgotten.
WITH gone AS (DELETE FROM login_throttle WHERE login_throttle.key = @key AND login_throttle.failures <= 1)
UPDATE login_throttle SET
    failures     = failures - 1,
    locked_until = CASE WHEN failures - 1 < @max_failures::int THEN NULL ELSE locked_until END
WHERE login_throttle.key = @key AND failures > 1;

-- name: ClearLoginFailures :exec
DELETE FROM login_throttle WHERE key = $1;

-- name: DeleteStaleLoginFailures :exec
-- Forgets counts whose window and lock are both over, so guessed addresses do not pile up.
DELETE FROM login_throttle
WHERE window_start < @window_start AND (locked_until IS NULL OR locked_until <= @now);
