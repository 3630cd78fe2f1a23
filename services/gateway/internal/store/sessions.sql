-- Web UI sessions and the login throttle (migration 00006_web.sql).

-- name: InsertSession :exec
INSERT INTO web_sessions (id_hash, user_id, created_at, last_seen_at, expires_at)
VALUES ($1, $2, $3, $4, $5);

-- name: SessionUser :one
SELECT sqlc.embed(s), sqlc.embed(u)
FROM web_sessions s
JOIN users u ON u.id = s.user_id
WHERE s.id_hash = $1;

-- name: TouchSession :exec
UPDATE web_sessions SET last_seen_at = $2, expires_at = $3 WHERE id_hash = $1;

-- name: DeleteSession :exec
DELETE FROM web_sessions WHERE id_hash = $1;

-- name: DeleteUserSessions :exec
DELETE FROM web_sessions WHERE user_id = $1;

-- name: DeleteExpiredSessions :exec
DELETE FROM web_sessions WHERE expires_at <= $1;

-- name: LoginLockedUntil :many
SELECT locked_until
FROM login_throttle
WHERE key = ANY(@keys::text[]) AND locked_until > @now
ORDER BY locked_until DESC
LIMIT 1;

-- name: RecordLoginFailure :exec
-- A failure in a window that started before @window_start opens a new window. The
-- count and the lock are decided on the row's old values, in one statement, so
-- concurrent failures are all counted.
INSERT INTO login_throttle AS t (key, failures, window_start, locked_until)
VALUES (@key, 1, @now, CASE WHEN 1 >= @max_failures::int THEN @lock_until::timestamptz END)
ON CONFLICT (key) DO UPDATE SET
    failures     = CASE WHEN t.window_start < @window_start THEN 1 ELSE t.failures + 1 END,
    window_start = CASE WHEN t.window_start < @window_start THEN @now ELSE t.window_start END,
    locked_until = CASE
        WHEN (CASE WHEN t.window_start < @window_start THEN 1 ELSE t.failures + 1 END) >= @max_failures::int
        THEN @lock_until::timestamptz
        ELSE t.locked_until
    END;

-- name: ClearLoginFailures :exec
DELETE FROM login_throttle WHERE key = $1;

-- name: DeleteStaleLoginFailures :exec
-- Forgets counts whose window and lock are both over, so guessed addresses do not pile up.
DELETE FROM login_throttle
WHERE window_start < @window_start AND (locked_until IS NULL OR locked_until <= @now);
