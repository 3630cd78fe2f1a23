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

-- +goose Down
DROP TRIGGER api_tokens_auth_change ON api_tokens;
DROP TRIGGER users_auth_change ON users;
DROP FUNCTION shipfile_notify_auth_change();
