-- +goose Up
-- Webhook throughput (docs/ARCHITECTURE.md, "The services"): nothing on the hot path
-- of a delivery locks or writes a row shared by all deliveries of a subscription.
--
-- 1. The deliveries' foreign key to webhook_subscriptions goes: each delivery insert
--    took a KEY SHARE lock on its subscription's row (MultiXact and lock waits under
--    load). The gateway deletes a subscription's deliveries with it, and the
--    dispatcher's health pass sweeps those of a subscription deleted meanwhile.
ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS webhook_deliveries_subscription_id_fkey;

-- 2. Per subscription: deliveries in flight at once across every dispatcher instance,
--    and deliveries per second (NULL: no limit).
ALTER TABLE webhook_subscriptions
    ADD COLUMN max_in_flight int NOT NULL DEFAULT 16 CHECK (max_in_flight BETWEEN 1 AND 256),
    ADD COLUMN rate_limit    int CHECK (rate_limit BETWEEN 1 AND 10000);

-- 3. "All events" is stored as such (events NULL), so an event type added later
--    reaches the subscriptions that chose all. Rows that selected every event type of
--    today chose all.
ALTER TABLE webhook_subscriptions ALTER COLUMN events DROP NOT NULL;
UPDATE webhook_subscriptions SET events = NULL
WHERE events @> ARRAY['package.created', 'package.finalized', 'package.file_uploaded', 'package.downloaded',
                      'package.revoked', 'package.deleted', 'package.expired']::text[];

-- 4. Health (last_success_at, failing_since, the automatic disabling) is derived from
--    webhook_attempts by a periodic pass off the hot path. Failures before
--    failures_counted_from (set when an admin turns a subscription on) do not count.
ALTER TABLE webhook_subscriptions ADD COLUMN failures_counted_from timestamptz;
-- The pass reads the attempts of its window by time; BRIN costs next to nothing on insert.
CREATE INDEX webhook_attempts_created_brin ON webhook_attempts USING brin (created_at);

-- 5. The dispatchers cache subscriptions; every change that matters to a delivery is
--    pushed to them on the channel shipfile_webhooks (payload: the subscription id), by
--    whoever writes it (gateway, shipctl, the dispatcher itself). The health columns
--    and updated_at alone do not notify.
-- +goose StatementBegin
CREATE FUNCTION webhook_subscriptions_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('shipfile_webhooks', OLD.id::text);
        RETURN OLD;
    END IF;
    IF TG_OP = 'INSERT'
       OR NEW.url IS DISTINCT FROM OLD.url
       OR NEW.events IS DISTINCT FROM OLD.events
       OR NEW.secret IS DISTINCT FROM OLD.secret
       OR NEW.previous_secret IS DISTINCT FROM OLD.previous_secret
       OR NEW.previous_secret_until IS DISTINCT FROM OLD.previous_secret_until
       OR NEW.active IS DISTINCT FROM OLD.active
       OR NEW.max_in_flight IS DISTINCT FROM OLD.max_in_flight
       OR NEW.rate_limit IS DISTINCT FROM OLD.rate_limit
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        PERFORM pg_notify('shipfile_webhooks', NEW.id::text);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER webhook_subscriptions_notify
AFTER INSERT OR UPDATE OR DELETE ON webhook_subscriptions
FOR EACH ROW EXECUTE FUNCTION webhook_subscriptions_notify();

-- 6. Live dispatcher instances (a heartbeat every few seconds), so each takes its share
--    of a subscription's rate_limit. UNLOGGED: nothing here must survive a crash.
CREATE UNLOGGED TABLE webhook_dispatchers (
    instance_id text PRIMARY KEY,
    seen_at     timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE webhook_dispatchers;
DROP TRIGGER webhook_subscriptions_notify ON webhook_subscriptions;
DROP FUNCTION webhook_subscriptions_notify();
DROP INDEX webhook_attempts_created_brin;
ALTER TABLE webhook_subscriptions DROP COLUMN failures_counted_from;
UPDATE webhook_subscriptions SET events = ARRAY['package.created', 'package.finalized', 'package.file_uploaded',
    'package.downloaded', 'package.revoked', 'package.deleted', 'package.expired']::text[]
WHERE events IS NULL;
ALTER TABLE webhook_subscriptions ALTER COLUMN events SET NOT NULL;
ALTER TABLE webhook_subscriptions DROP COLUMN rate_limit, DROP COLUMN max_in_flight;
DELETE FROM webhook_deliveries d WHERE NOT EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.id = d.subscription_id);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_subscription_id_fkey
    FOREIGN KEY (subscription_id) REFERENCES webhook_subscriptions (id) ON DELETE CASCADE;
