-- +goose Up
CREATE TABLE packages (
    id                uuid PRIMARY KEY,
    owner_user_id     bigint      NOT NULL REFERENCES users (id),
    title             text        NOT NULL,
    recipient_email   text        NOT NULL,
    recipient_name    text        NOT NULL DEFAULT '',
    direction         text        NOT NULL CHECK (direction IN ('outbound', 'inbound')),
    state             text        NOT NULL CHECK (state IN ('draft', 'active', 'revoked', 'expired')),
    ttl_days          int         NOT NULL CHECK (ttl_days BETWEEN 1 AND 365),
    note              text        NOT NULL DEFAULT '',
    file_count        int         NOT NULL DEFAULT 0,
    total_size        bigint      NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    finalized_at      timestamptz,
    -- The one source of truth for expiry: the expiry service acts on it.
    expires_at        timestamptz NOT NULL,
    revoked_at        timestamptz,
    -- SHA-256 of the magic link's token; the raw token is never stored.
    link_hash         bytea UNIQUE,
    link_use_count    bigint      NOT NULL DEFAULT 0,
    link_last_used_at timestamptz
);
CREATE INDEX packages_owner_created_idx ON packages (owner_user_id, created_at DESC, id DESC);
CREATE INDEX packages_created_idx ON packages (created_at DESC, id DESC);
CREATE INDEX packages_expiring_idx ON packages (expires_at) WHERE state <> 'expired';

CREATE TABLE files (
    id           uuid PRIMARY KEY,
    package_id   uuid        NOT NULL REFERENCES packages (id) ON DELETE CASCADE,
    filename     text        NOT NULL,
    size         bigint      NOT NULL,
    content_type text        NOT NULL,
    sha256       text        NOT NULL,
    -- Object keys never contain the user's filename.
    object_key   text        NOT NULL UNIQUE,
    uploaded_by  text        NOT NULL CHECK (uploaded_by IN ('owner', 'recipient')),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX files_package_idx ON files (package_id, created_at, id);

-- Objects whose rows are gone and that must be removed from storage. Written in the
-- same transaction as the deletion, removed once the object is gone, so a failure
-- between the two never leaves an orphan object for good.
CREATE TABLE object_deletions (
    object_key text PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audit_log (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at    timestamptz NOT NULL DEFAULT now(),
    actor         text        NOT NULL CHECK (actor IN ('user', 'link', 'system')),
    actor_user_id bigint,
    action        text        NOT NULL,
    -- No foreign keys: the log outlives deleted packages.
    package_id    uuid,
    file_id       uuid,
    ip            text        NOT NULL DEFAULT '',
    user_agent    text        NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_package_idx ON audit_log (package_id, id DESC);

-- +goose Down
DROP TABLE audit_log;
DROP TABLE object_deletions;
DROP TABLE files;
DROP TABLE packages;
