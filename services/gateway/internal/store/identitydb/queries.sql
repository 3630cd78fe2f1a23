-- The identity domain (internal/app/identity): users and their API tokens (migration
-- 00001_identity.sql, the language 00037), web sessions and the login throttle
-- (00006_web.sql), sign-ins through the OpenID provider and the identities linked to
-- users (00018_oidc.sql), and the accounts' notices and the rechecks of sessions begun
-- through the provider (00029_identity_audit.sql).

-- name: CreateUser :one
INSERT INTO users (email, name, role, password_hash)
VALUES ($1, $2, $3, $4)
RETURNING *;

-- name: GetUser :one
SELECT * FROM users WHERE id = $1;

-- name: GetUserByEmail :one
SELECT * FROM users WHERE lower(email) = lower(@email::text);

-- name: ListUsers :many
SELECT * FROM users ORDER BY id;

-- name: CountUsers :one
SELECT count(*) FROM users;

-- name: UpdateUser :one
UPDATE users SET
    email         = coalesce(sqlc.narg(email), email),
    name          = coalesce(sqlc.narg(name), name),
    role          = coalesce(sqlc.narg(role), role),
    disabled      = coalesce(sqlc.narg(disabled), disabled),
    password_hash = coalesce(sqlc.narg(password_hash), password_hash)
WHERE id = @id
RETURNING *;

-- name: SetUserLanguage :one
-- Sets the user's language (pkg/i18n's code), or clears it (NULL: the browser's).
UPDATE users SET language = sqlc.narg(language) WHERE id = @id
RETURNING *;

-- name: LockSetup :exec
-- Serialises first-user creation across gateway instances, until the transaction ends.
SELECT pg_advisory_xact_lock(@key::bigint);

-- name: LockActiveAdmins :many
-- Locks every active admin's row, so that two changes that would each take one away
-- run one after the other.
SELECT id FROM users WHERE role = 'admin' AND NOT disabled ORDER BY id FOR UPDATE;

-- name: CreateToken :one
INSERT INTO api_tokens (user_id, name, prefix, token_hash, expires_at)
VALUES ($1, $2, $3, $4, $5)
RETURNING id, user_id, name, prefix, created_at, expires_at, last_used_at;

-- name: ListTokens :many
SELECT id, user_id, name, prefix, created_at, expires_at, last_used_at
FROM api_tokens
WHERE user_id = $1
ORDER BY id DESC;

-- name: DeleteToken :execrows
DELETE FROM api_tokens WHERE id = $1 AND user_id = $2;

-- name: TokenOwner :one
SELECT t.id AS token_id, t.expires_at, t.last_used_at, sqlc.embed(u)
FROM api_tokens t
JOIN users u ON u.id = t.user_id
WHERE t.token_hash = $1;

-- name: TouchTokens :exec
-- Writes a batch of tokens' last uses; never moves last_used_at back. The arrays are
-- zipped by unnest in one select list (set-returning functions there advance
-- together): sqlc knows no multi-argument unnest in FROM.
UPDATE api_tokens t SET last_used_at = u.at
FROM (SELECT unnest(@ids::bigint[]) AS id, unnest(@ats::timestamptz[]) AS at) AS u
WHERE t.id = u.id AND (t.last_used_at IS NULL OR t.last_used_at < u.at);

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

-- name: GetUserByOIDC :one
SELECT * FROM users WHERE oidc_issuer = @issuer::text AND oidc_subject = @subject::text;

-- name: LinkUserOIDC :one
-- Links a user to an identity of the provider, only while it has none.
UPDATE users SET oidc_issuer = @issuer::text, oidc_subject = @subject::text
WHERE id = @id AND oidc_subject IS NULL
RETURNING *;

-- name: CreateOIDCUser :one
INSERT INTO users (email, name, role, oidc_issuer, oidc_subject)
VALUES (@email, @name, @role, @issuer::text, @subject::text)
RETURNING *;

-- name: SetUserRole :one
UPDATE users SET role = @role WHERE id = @id RETURNING *;

-- name: InsertOIDCLogin :exec
INSERT INTO oidc_logins (state_hash, nonce, verifier, next, created_at, link_user_id)
VALUES (@state_hash, @nonce, @verifier, @next, @created_at, sqlc.narg(link_user_id));

-- name: TakeOIDCLogin :one
DELETE FROM oidc_logins WHERE state_hash = $1 RETURNING *;

-- name: DeleteStaleOIDCLogins :exec
DELETE FROM oidc_logins WHERE created_at < $1;

-- name: InsertAccountNotice :exec
INSERT INTO account_notices (user_id, event, detail) VALUES (@user_id, @event, @detail);

-- name: GetUserForUpdate :one
SELECT * FROM users WHERE id = $1 FOR UPDATE;

-- name: UnlinkUserOIDC :one
-- Removes the user's identity of the provider, only while it is that identity and the
-- user has a password to sign in with.
UPDATE users SET oidc_issuer = NULL, oidc_subject = NULL
WHERE id = @id AND oidc_issuer = @issuer::text AND oidc_subject = @subject::text AND password_hash IS NOT NULL
RETURNING *;

-- name: DeleteOIDCSessions :exec
-- Ends the user's sessions begun through the identity (issuer, subject).
DELETE FROM web_sessions WHERE user_id = @user_id AND oidc_issuer = @issuer::text AND oidc_subject = @subject::text;

-- name: ClaimDueOIDCSessions :many
-- Moves the next check of up to @max_rows live sessions due at @now to @next and
-- returns them; SKIP LOCKED hands each due session to one caller.
UPDATE web_sessions s SET oidc_check_at = @next::timestamptz
WHERE s.id_hash IN (
    SELECT d.id_hash FROM web_sessions d
    WHERE d.oidc_check_at <= @now::timestamptz AND d.expires_at > @now::timestamptz
    ORDER BY d.oidc_check_at
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED
)
RETURNING s.*;

-- name: SetSessionRefresh :exec
UPDATE web_sessions SET oidc_refresh = @sealed::text WHERE id_hash = @id_hash;
