-- +goose Up
-- Webhook deliveries (issue 21): a delivery's row and its attempt are written by one
-- statement of the dispatcher's group commit (services/webhooks RecordAttempts), so two
-- constraints that cost every delivery go, and what they kept is kept otherwise.
--
-- 1. The attempts' foreign key to their delivery: its check locked the row the same
--    statement had just inserted (a lock record in the WAL) through a lookup per attempt,
--    about a fifth of a backend's CPU per delivery. Deleting deliveries still deletes
--    their attempts: a statement-level trigger, one join per DELETE instead of one scan of
--    webhook_attempts per deleted delivery (the cascade had no index on delivery_id).
ALTER TABLE webhook_attempts DROP CONSTRAINT IF EXISTS webhook_attempts_delivery_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION webhook_deliveries_delete_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM webhook_attempts a USING gone WHERE a.delivery_id = gone.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER webhook_deliveries_delete_attempts
AFTER DELETE ON webhook_deliveries
REFERENCING OLD TABLE AS gone
FOR EACH STATEMENT EXECUTE FUNCTION webhook_deliveries_delete_attempts();

-- 2. UNIQUE (event_id, subscription_id): a delivery's id is a UUIDv5 of its event id and
--    hook id, so the primary key already allows one delivery per event and subscription;
--    no query reads this index, and it was a tenth of the WAL of a delivery.
ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS webhook_deliveries_event_id_subscription_id_key;

-- +goose Down
DROP TRIGGER webhook_deliveries_delete_attempts ON webhook_deliveries;
DROP FUNCTION webhook_deliveries_delete_attempts();
DELETE FROM webhook_attempts a WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id = a.delivery_id);
ALTER TABLE webhook_attempts ADD CONSTRAINT webhook_attempts_delivery_id_fkey
    FOREIGN KEY (delivery_id) REFERENCES webhook_deliveries (id) ON DELETE CASCADE;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_id_subscription_id_key
    UNIQUE (event_id, subscription_id);
