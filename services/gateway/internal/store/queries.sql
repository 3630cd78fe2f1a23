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

-- name: TouchToken :exec
UPDATE api_tokens SET last_used_at = now() WHERE id = $1;
