-- End-to-end encryption (migration 00020): a package's encrypted manifest and a
-- user's age key pair. The server stores both as it gets them and cannot read them.
-- A changed key pair is noticed to its user in the same transaction (account_notices,
-- migration 00029_identity_audit.sql, whose other notices identitydb writes).

-- name: PutPackageManifest :exec
INSERT INTO package_manifests (package_id, data, updated_at) VALUES (@package_id, @data, now())
ON CONFLICT (package_id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at;

-- name: GetPackageManifest :one
SELECT data FROM package_manifests WHERE package_id = @package_id;

-- name: PutUserKey :one
INSERT INTO user_keys (user_id, public_key, sealed_identity, created_at) VALUES (@user_id, @public_key, @sealed_identity, now())
ON CONFLICT (user_id) DO UPDATE SET public_key = excluded.public_key, sealed_identity = excluded.sealed_identity,
                                    created_at = excluded.created_at
RETURNING *;

-- name: GetUserKey :one
SELECT * FROM user_keys WHERE user_id = @user_id;

-- name: InsertAccountNotice :exec
INSERT INTO account_notices (user_id, event, detail) VALUES (@user_id, @event, @detail);
