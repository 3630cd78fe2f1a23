-- +goose Up
-- The delivery log's retention (the dispatcher, SHIPFILE_WEBHOOK_LOG_RETENTION)
-- removes attempts by their age, then the deliveries last changed before that age, whose
-- attempts are all older. The trigger of 00021 would join every batch of removed
-- deliveries with the whole of webhook_attempts, which has no index on delivery_id (one
-- would cost every attempt's insert): a transaction that sets shipfile.attempts_removed
-- to on says that it removed the attempts itself, and the trigger does nothing. Every
-- other DELETE (a subscription deleted, its deliveries swept) is unchanged.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_deliveries_delete_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('shipfile.attempts_removed', true) = 'on' THEN
        RETURN NULL;
    END IF;
    DELETE FROM webhook_attempts a USING gone WHERE a.delivery_id = gone.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_deliveries_delete_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM webhook_attempts a USING gone WHERE a.delivery_id = gone.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
