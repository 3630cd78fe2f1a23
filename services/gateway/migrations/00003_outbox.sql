-- +goose Up
CREATE TABLE outbox (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    msg_id       text        NOT NULL UNIQUE,  -- Nats-Msg-Id: the event id or mail job id
    subject      text        NOT NULL,
    payload      bytea,                        -- NULL once published when ephemeral
    ephemeral    boolean     NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz,
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text,
    -- A pending row always has something to publish.
    CONSTRAINT outbox_pending_payload CHECK (published_at IS NOT NULL OR payload IS NOT NULL)
);
-- The relay's scan: pending rows in id order. Small, as rows leave it once published.
CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;

-- +goose Down
DROP TABLE outbox;
