-- +goose Up
-- Policies and quotas (docs/POLICIES.md): groups with a policy each, their members, the
-- default policy of users in no group, and each user's running usage.
--
-- A policy is a JSON object of limits (proto/openapi.yaml Policy); a missing or null
-- limit means no limit.
CREATE TABLE policy_groups (
    id          bigserial   PRIMARY KEY,
    name        text        NOT NULL,
    policy      jsonb       NOT NULL DEFAULT '{}',
    -- Names in the OpenID Connect groups claim that make a signed-in user a member.
    oidc_groups text[]      NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX policy_groups_name_idx ON policy_groups (lower(name));

-- source: 'admin' (put by an admin) or 'oidc' (taken from the groups claim at sign-in
-- and at each recheck, and taken away there when the claim no longer names the group).
CREATE TABLE policy_group_members (
    group_id   bigint      NOT NULL REFERENCES policy_groups (id) ON DELETE CASCADE,
    user_id    bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    source     text        NOT NULL CHECK (source IN ('admin', 'oidc')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, user_id)
);
CREATE INDEX policy_group_members_user_idx ON policy_group_members (user_id);

-- The one row of the default policy.
CREATE TABLE default_policy (
    id         boolean     PRIMARY KEY DEFAULT true CHECK (id),
    policy     jsonb       NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO default_policy (id) VALUES (true);

-- Each user's running usage, kept by the triggers below in the transactions that change
-- it, so no request sums files:
--   used_bytes      the total_size of the user's packages that are not expired
--                   (files strangers uploaded through the user's requests included)
--   reserved_bytes  the bytes of the user's quota_holds (uploads under way)
--   active_packages the user's packages in draft or active
-- notified_at: when the 90 % notice went out; cleared when usage falls below 90 %.
CREATE TABLE user_usage (
    user_id         bigint      PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    used_bytes      bigint      NOT NULL DEFAULT 0,
    reserved_bytes  bigint      NOT NULL DEFAULT 0,
    active_packages int         NOT NULL DEFAULT 0,
    notified_at     timestamptz
);
INSERT INTO user_usage (user_id, used_bytes, active_packages)
SELECT u.id,
       COALESCE(sum(p.total_size) FILTER (WHERE p.state <> 'expired'), 0),
       count(p.id) FILTER (WHERE p.state IN ('draft', 'active'))
FROM users u LEFT JOIN packages p ON p.owner_user_id = u.id
GROUP BY u.id;

-- Bytes an upload under way holds against its owner's quota. Taken with a conditional
-- UPDATE of user_usage (policies.sql ReserveBytes), given back when the row goes:
--   tus_upload_id  a resumable upload's whole Upload-Length, from its creation until it
--                  completes (a trigger on tus_uploads) or its row is deleted (expiry,
--                  termination, the package's end: ON DELETE CASCADE)
--   object_key     a multipart upload's bytes as they stream, until the file row commits
--                  (which deletes the object key's reservation: ON DELETE CASCADE)
--   expires_at     a hold not yet tied to either; the sweep deletes it once past
CREATE TABLE quota_holds (
    id            uuid        PRIMARY KEY,
    user_id       bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    bytes         bigint      NOT NULL CHECK (bytes >= 0),
    tus_upload_id uuid        REFERENCES tus_uploads (id) ON DELETE CASCADE,
    object_key    text        REFERENCES object_reservations (object_key) ON DELETE CASCADE,
    expires_at    timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX quota_holds_tus_idx ON quota_holds (tus_upload_id) WHERE tus_upload_id IS NOT NULL;
CREATE INDEX quota_holds_object_idx ON quota_holds (object_key) WHERE object_key IS NOT NULL;
CREATE INDEX quota_holds_expiry_idx ON quota_holds (expires_at) WHERE expires_at IS NOT NULL;

-- The 90 % notice is an account notice the mailer sends (services/mailer, account.go).
ALTER TABLE account_notices DROP CONSTRAINT account_notices_event_check,
    ADD CONSTRAINT account_notices_event_check
        CHECK (event IN ('sso_linked', 'sso_unlinked', 'role_changed', 'key_changed', 'quota_90'));

-- +goose StatementBegin
CREATE FUNCTION user_usage_for_user() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO user_usage (user_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER users_usage AFTER INSERT ON users FOR EACH ROW EXECUTE FUNCTION user_usage_for_user();

-- +goose StatementBegin
CREATE FUNCTION user_usage_of_package() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_bytes bigint := 0;
    old_active int := 0;
    new_bytes bigint := 0;
    new_active int := 0;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        old_bytes := CASE WHEN OLD.state <> 'expired' THEN OLD.total_size ELSE 0 END;
        old_active := CASE WHEN OLD.state IN ('draft', 'active') THEN 1 ELSE 0 END;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        new_bytes := CASE WHEN NEW.state <> 'expired' THEN NEW.total_size ELSE 0 END;
        new_active := CASE WHEN NEW.state IN ('draft', 'active') THEN 1 ELSE 0 END;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.owner_user_id = NEW.owner_user_id THEN
        IF new_bytes <> old_bytes OR new_active <> old_active THEN
            UPDATE user_usage SET used_bytes = used_bytes + new_bytes - old_bytes,
                                  active_packages = active_packages + new_active - old_active
            WHERE user_id = NEW.owner_user_id;
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' AND (old_bytes <> 0 OR old_active <> 0) THEN
        UPDATE user_usage SET used_bytes = used_bytes - old_bytes, active_packages = active_packages - old_active
        WHERE user_id = OLD.owner_user_id;
    END IF;
    IF TG_OP <> 'DELETE' AND (new_bytes <> 0 OR new_active <> 0) THEN
        UPDATE user_usage SET used_bytes = used_bytes + new_bytes, active_packages = active_packages + new_active
        WHERE user_id = NEW.owner_user_id;
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER packages_usage_insert AFTER INSERT ON packages
    FOR EACH ROW EXECUTE FUNCTION user_usage_of_package();
CREATE TRIGGER packages_usage_update AFTER UPDATE OF state, total_size, owner_user_id ON packages
    FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.total_size IS DISTINCT FROM NEW.total_size
          OR OLD.owner_user_id IS DISTINCT FROM NEW.owner_user_id)
    EXECUTE FUNCTION user_usage_of_package();
CREATE TRIGGER packages_usage_delete AFTER DELETE ON packages
    FOR EACH ROW EXECUTE FUNCTION user_usage_of_package();

-- +goose StatementBegin
CREATE FUNCTION user_usage_release_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE user_usage SET reserved_bytes = GREATEST(reserved_bytes - OLD.bytes, 0) WHERE user_id = OLD.user_id;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER quota_holds_release AFTER DELETE ON quota_holds
    FOR EACH ROW WHEN (OLD.bytes > 0) EXECUTE FUNCTION user_usage_release_hold();

-- A completed resumable upload's bytes are the file's now (counted in used_bytes by the
-- same transaction's package update): its hold goes.
-- +goose StatementBegin
CREATE FUNCTION quota_holds_of_completed_upload() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM quota_holds WHERE tus_upload_id = NEW.id;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER tus_uploads_completed AFTER UPDATE OF file_completed ON tus_uploads
    FOR EACH ROW WHEN (NEW.file_completed AND NOT OLD.file_completed)
    EXECUTE FUNCTION quota_holds_of_completed_upload();

-- +goose Down
ALTER TABLE account_notices DROP CONSTRAINT account_notices_event_check,
    ADD CONSTRAINT account_notices_event_check
        CHECK (event IN ('sso_linked', 'sso_unlinked', 'role_changed', 'key_changed'));
DROP TRIGGER tus_uploads_completed ON tus_uploads;
DROP FUNCTION quota_holds_of_completed_upload();
DROP TABLE quota_holds;
DROP FUNCTION user_usage_release_hold();
DROP TRIGGER packages_usage_insert ON packages;
DROP TRIGGER packages_usage_update ON packages;
DROP TRIGGER packages_usage_delete ON packages;
DROP FUNCTION user_usage_of_package();
DROP TRIGGER users_usage ON users;
DROP FUNCTION user_usage_for_user();
DROP TABLE user_usage;
DROP TABLE default_policy;
DROP TABLE policy_group_members;
DROP TABLE policy_groups;
