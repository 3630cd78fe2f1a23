-- Policies and quotas (migration 00032; docs/POLICIES.md): groups, members, the default
-- policy, the running usage and the reservations (quota_holds).

-- name: CreatePolicyGroup :one
INSERT INTO policy_groups (name, policy, oidc_groups) VALUES (@name, @policy, @oidc_groups)
RETURNING *;

-- name: ListPolicyGroups :many
SELECT g.*, COALESCE((SELECT array_agg(m.user_id ORDER BY m.user_id) FROM policy_group_members m WHERE m.group_id = g.id), '{}')::bigint[] AS members
FROM policy_groups g ORDER BY lower(g.name);

-- name: GetPolicyGroup :one
SELECT g.*, COALESCE((SELECT array_agg(m.user_id ORDER BY m.user_id) FROM policy_group_members m WHERE m.group_id = g.id), '{}')::bigint[] AS members
FROM policy_groups g WHERE g.id = @id;

-- name: UpdatePolicyGroup :one
UPDATE policy_groups SET name = @name, policy = @policy, oidc_groups = @oidc_groups, updated_at = now()
WHERE id = @id
RETURNING *;

-- name: DeletePolicyGroup :execrows
DELETE FROM policy_groups WHERE id = @id;

-- name: PutPolicyGroupMember :exec
-- An admin's membership; one taken from the claim becomes the admin's.
INSERT INTO policy_group_members (group_id, user_id, source) VALUES (@group_id, @user_id, 'admin')
ON CONFLICT (group_id, user_id) DO UPDATE SET source = 'admin';

-- name: DeletePolicyGroupMember :execrows
DELETE FROM policy_group_members WHERE group_id = @group_id AND user_id = @user_id;

-- name: DropOIDCMemberships :exec
-- The memberships taken from the claim whose group the claim no longer names.
DELETE FROM policy_group_members m
USING policy_groups g
WHERE m.group_id = g.id AND m.user_id = @user_id AND m.source = 'oidc'
  AND NOT (g.oidc_groups && @claim::text[]);

-- name: AddOIDCMemberships :exec
-- The groups the claim names, taken as memberships (one an admin put stays the admin's).
INSERT INTO policy_group_members (group_id, user_id, source)
SELECT g.id, @user_id, 'oidc' FROM policy_groups g WHERE g.oidc_groups && @claim::text[]
ON CONFLICT (group_id, user_id) DO NOTHING;

-- name: GetDefaultPolicy :one
SELECT policy FROM default_policy WHERE id;

-- name: SetDefaultPolicy :exec
UPDATE default_policy SET policy = @policy, updated_at = now() WHERE id;

-- name: UserPolicies :one
-- The default policy and the policies of the user's groups, in one round trip.
SELECT (SELECT d.policy FROM default_policy d WHERE d.id)::jsonb AS default_policy,
       COALESCE((SELECT jsonb_agg(g.policy) FROM policy_groups g
                 JOIN policy_group_members m ON m.group_id = g.id WHERE m.user_id = @user_id), '[]')::jsonb AS group_policies;

-- name: GetUsage :one
SELECT uu.user_id, u.email, u.name, uu.used_bytes, uu.reserved_bytes, uu.active_packages, uu.notified_at
FROM user_usage uu JOIN users u ON u.id = uu.user_id
WHERE uu.user_id = @user_id;

-- name: ListUsage :many
-- Every user's usage: @sort is used_bytes, reserved_bytes, active_packages (each
-- descending) or email.
SELECT uu.user_id, u.email, u.name, uu.used_bytes, uu.reserved_bytes, uu.active_packages, uu.notified_at
FROM user_usage uu JOIN users u ON u.id = uu.user_id
ORDER BY CASE @sort::text WHEN 'used_bytes' THEN uu.used_bytes WHEN 'reserved_bytes' THEN uu.reserved_bytes
                          WHEN 'active_packages' THEN uu.active_packages ELSE 0 END DESC,
         u.email;

-- name: LockStorageCap :exec
-- Serialises the reservations while SHIPFILE_STORAGE_CAP bounds all users together,
-- until the transaction ends.
SELECT pg_advisory_xact_lock(hashtextextended('shipfile storage cap', 0));

-- name: StorageHeld :one
SELECT COALESCE(sum(used_bytes + reserved_bytes), 0)::bigint AS held FROM user_usage;

-- name: ReserveUsage :one
-- Adds @bytes to the user's reserved total when they fit under @quota (null: no
-- quota); no row when they do not.
UPDATE user_usage SET reserved_bytes = reserved_bytes + @bytes
WHERE user_id = @user_id
  AND (sqlc.narg(quota)::bigint IS NULL OR used_bytes + reserved_bytes + @bytes <= sqlc.narg(quota)::bigint)
RETURNING user_id, used_bytes, reserved_bytes, active_packages;

-- name: ReserveNewHold :one
-- ReserveUsage and InsertQuotaHold in one statement (no storage cap to serialise on):
-- no row when the bytes do not fit.
WITH r AS (
    UPDATE user_usage u SET reserved_bytes = u.reserved_bytes + @bytes
    WHERE u.user_id = @user_id
      AND (sqlc.narg(quota)::bigint IS NULL OR u.used_bytes + u.reserved_bytes + @bytes <= sqlc.narg(quota)::bigint)
    RETURNING u.user_id, u.used_bytes, u.reserved_bytes, u.active_packages
), h AS (
    INSERT INTO quota_holds (id, user_id, bytes, tus_upload_id, object_key, expires_at)
    SELECT @id, r.user_id, @bytes, sqlc.narg(tus_upload_id)::uuid, sqlc.narg(object_key)::text, sqlc.narg(expires_at)::timestamptz FROM r
)
SELECT user_id, used_bytes, reserved_bytes, active_packages FROM r;

-- name: ReserveGrowHold :one
-- ReserveUsage and GrowQuotaHold in one statement: no row when the bytes do not fit
-- (or the hold is gone).
WITH r AS (
    UPDATE user_usage u SET reserved_bytes = u.reserved_bytes + @bytes
    WHERE u.user_id = @user_id AND EXISTS (SELECT 1 FROM quota_holds q WHERE q.id = @id)
      AND (sqlc.narg(quota)::bigint IS NULL OR u.used_bytes + u.reserved_bytes + @bytes <= sqlc.narg(quota)::bigint)
    RETURNING u.user_id, u.used_bytes, u.reserved_bytes, u.active_packages
), h AS (
    UPDATE quota_holds q SET bytes = q.bytes + @bytes FROM r WHERE q.id = @id
)
SELECT user_id, used_bytes, reserved_bytes, active_packages FROM r;

-- name: InsertQuotaHold :exec
INSERT INTO quota_holds (id, user_id, bytes, tus_upload_id, object_key, expires_at)
VALUES (@id, @user_id, @bytes, sqlc.narg(tus_upload_id)::uuid, sqlc.narg(object_key)::text, sqlc.narg(expires_at)::timestamptz);

-- name: GrowQuotaHold :execrows
UPDATE quota_holds SET bytes = bytes + @bytes WHERE id = @id;

-- name: AttachQuotaHold :exec
UPDATE quota_holds SET tus_upload_id = @tus_upload_id, expires_at = NULL WHERE id = @id;

-- name: QuotaHoldExists :one
SELECT EXISTS (SELECT 1 FROM quota_holds WHERE id = @id)::boolean;

-- name: DeleteQuotaHold :exec
DELETE FROM quota_holds WHERE id = @id;

-- name: SweepQuotaHolds :execrows
DELETE FROM quota_holds WHERE expires_at < now();

-- name: MarkUsageNotified :one
-- Sets notified_at when @nearly_full and it is not set (due: true), clears it when
-- not @nearly_full; when due, the user's 90 % notice (account_notices 'quota_90',
-- naming @detail) is written in the same statement.
WITH prev AS (SELECT p.notified_at FROM user_usage p WHERE p.user_id = @user_id FOR UPDATE),
upd AS (
    UPDATE user_usage uu SET notified_at = CASE WHEN @nearly_full::boolean THEN COALESCE(uu.notified_at, now()) ELSE NULL END
    FROM prev WHERE uu.user_id = @user_id
    RETURNING (@nearly_full::boolean AND prev.notified_at IS NULL)::boolean AS due
),
notice AS (
    INSERT INTO account_notices (user_id, event, detail)
    SELECT @user_id, 'quota_90', @detail::text FROM upd WHERE upd.due
)
SELECT due FROM upd;

-- name: TryLockUserCreations :one
-- A session lock on the user's package creations while a max_active_packages policy
-- counts them (released by UnlockUserCreations on the same connection).
SELECT pg_try_advisory_lock(hashtextextended('shipfile package creations', @user_id::bigint))::boolean;

-- name: UnlockUserCreations :exec
SELECT pg_advisory_unlock(hashtextextended('shipfile package creations', @user_id::bigint));
