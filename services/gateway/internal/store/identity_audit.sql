-- Accounts' audit trail and security notices, and the rechecks of sessions begun
-- through the OpenID provider (migration 00029_identity_audit.sql).

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
