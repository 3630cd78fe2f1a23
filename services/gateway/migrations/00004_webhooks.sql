-- +goose Up
CREATE TABLE webhook_subscriptions (
    id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url                   text        NOT NULL,
    description           text        NOT NULL DEFAULT '',
    -- Selected event types (package.*); webhook.test is sent whatever the selection.
    events                text[]      NOT NULL,
    -- whsec_ + base64 of 32 random bytes. Shown once, at creation or rotation.
    secret                text        NOT NULL,
    -- After a rotation the old secret also signs webhook-signature until this time.
    previous_secret       text,
    previous_secret_until timestamptz,
    active                boolean     NOT NULL DEFAULT true,
    -- Why the subscription is disabled (410 Gone, 5 days of failures, an admin); NULL while active.
    disabled_reason       text,
    disabled_at           timestamptz,
    -- The first failed attempt since the last success; NULL while deliveries succeed.
    failing_since         timestamptz,
    last_success_at       timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

-- One delivery per event × subscription; its id is X-Service-Delivery and webhook-id.
CREATE TABLE webhook_deliveries (
    id               uuid PRIMARY KEY,
    subscription_id  bigint      NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    event_id         text        NOT NULL,
    event            text        NOT NULL,
    -- The exact JSON body, the same bytes on every attempt.
    body             bytea       NOT NULL,
    status           text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
    -- Attempts in all; attempts of the current round (a redelivery starts a new round).
    attempts         int         NOT NULL DEFAULT 0,
    round_attempts   int         NOT NULL DEFAULT 0,
    last_status_code int,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (event_id, subscription_id)
);
CREATE INDEX webhook_deliveries_subscription_idx ON webhook_deliveries (subscription_id, created_at DESC);
CREATE INDEX webhook_deliveries_pending_idx ON webhook_deliveries (created_at) WHERE status = 'pending';

-- Every attempt, for the delivery log.
CREATE TABLE webhook_attempts (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id      uuid        NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    subscription_id  bigint      NOT NULL,
    attempt          int         NOT NULL,
    status_code      int,
    error            text,
    duration_ms      int         NOT NULL,
    response_excerpt text,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_attempts_subscription_idx ON webhook_attempts (subscription_id, id DESC);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_subscriptions;
