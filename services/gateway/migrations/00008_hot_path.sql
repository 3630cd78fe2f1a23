-- +goose Up
-- Each gateway caches API token look-ups for a moment. These triggers tell every gateway
-- (LISTEN shipfile_auth) when a token or a user changes, whoever changes it (the API,
-- the web UI, shipctl, plain SQL), so a revoked token or a disabled user stops working
-- within a second on every instance. They fire on rare writes only: not on
-- last_used_at, which the gateways write in batches.
-- +goose StatementBegin
CREATE FUNCTION shipfile_notify_auth_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'users' THEN
        PERFORM pg_notify('shipfile_auth', 'user ' || OLD.id);
    ELSE
        PERFORM pg_notify('shipfile_auth', 'token ' || OLD.id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER users_auth_change AFTER UPDATE OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION shipfile_notify_auth_change();
CREATE TRIGGER api_tokens_auth_change AFTER DELETE OR UPDATE OF user_id, token_hash, expires_at ON api_tokens
    FOR EACH ROW EXECUTE FUNCTION shipfile_notify_auth_change();

-- packages.owner_user_id no longer REFERENCES users: the foreign-key check locked the
-- owner's users row (FOR KEY SHARE: a MultiXact and a WAL record on that row once two
-- creations overlap) in every package creation, one hot row per user. Users are never
-- deleted (they are disabled); a trigger refuses to delete one who owns packages all
-- the same.
ALTER TABLE packages DROP CONSTRAINT packages_owner_user_id_fkey;
-- +goose StatementBegin
CREATE FUNCTION shipfile_refuse_owner_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM packages WHERE owner_user_id = OLD.id) THEN
        RAISE foreign_key_violation USING MESSAGE = 'user ' || OLD.id || ' owns packages';
    END IF;
    RETURN OLD;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER users_owner_guard BEFORE DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION shipfile_refuse_owner_delete();

-- +goose Down
DROP TRIGGER users_owner_guard ON users;
DROP FUNCTION shipfile_refuse_owner_delete();
ALTER TABLE packages ADD CONSTRAINT packages_owner_user_id_fkey FOREIGN KEY (owner_user_id) REFERENCES users (id);
DROP TRIGGER api_tokens_auth_change ON api_tokens;
DROP TRIGGER users_auth_change ON users;
DROP FUNCTION shipfile_notify_auth_change();
