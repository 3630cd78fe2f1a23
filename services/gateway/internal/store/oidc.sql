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
