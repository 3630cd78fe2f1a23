-- +goose Up
-- Protecting a link, limiting downloads, telling the owner (docs/API.md,
-- "Protected links", "Download limit", "Owner notifications").
ALTER TABLE packages
    -- argon2id of the link's password; NULL: no password. Grants of the link are keyed
    -- by it, so a new password (or none) ends every grant at once.
    ADD COLUMN password_hash text,
    -- How many times each file may be downloaded through the link; NULL: no limit.
    ADD COLUMN max_downloads int CHECK (max_downloads BETWEEN 1 AND 10000),
    ADD COLUMN notify_owner  boolean NOT NULL DEFAULT true;

-- Downloads through the link, taken by a conditional UPDATE when a download starts and
-- given back when it fails before the last byte.
ALTER TABLE files ADD COLUMN download_count int NOT NULL DEFAULT 0 CHECK (download_count >= 0);

-- Wrong passwords given to a link's unlock, for the throttle (5 within 15 minutes).
CREATE TABLE link_unlock_failures (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    package_id uuid        NOT NULL REFERENCES packages (id) ON DELETE CASCADE,
    failed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX link_unlock_failures_package_idx ON link_unlock_failures (package_id, failed_at);

-- The owner's notifications, written and sent by the mailer. kind 'downloaded': one
-- per package ever (its first download). kind 'uploads': one per burst of recipient
-- uploads; the burst is 'open' while uploads arrive (due_at moves on with each), any
-- mailer closes it once due_at has passed ('pending') and one sends it while holding
-- the row lock, so several mailers send one e-mail per burst.
CREATE TABLE owner_notifications (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    package_id    uuid        NOT NULL REFERENCES packages (id) ON DELETE CASCADE,
    kind          text        NOT NULL CHECK (kind IN ('downloaded', 'uploads')),
    state         text        NOT NULL CHECK (state IN ('open', 'pending', 'sent', 'failed', 'dropped')),
    due_at        timestamptz NOT NULL,
    attempts      int         NOT NULL DEFAULT 0,
    last_error    text        NOT NULL DEFAULT '',
    message_id    text        NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    sent_at       timestamptz
);
CREATE UNIQUE INDEX owner_notifications_downloaded_idx ON owner_notifications (package_id) WHERE kind = 'downloaded';
CREATE UNIQUE INDEX owner_notifications_open_burst_idx ON owner_notifications (package_id) WHERE kind = 'uploads' AND state = 'open';
CREATE INDEX owner_notifications_due_idx ON owner_notifications (due_at) WHERE state IN ('open', 'pending');

-- The files of an upload burst; one file belongs to one burst (a redelivered event adds
-- nothing).
CREATE TABLE owner_notification_files (
    file_id         uuid PRIMARY KEY,
    notification_id bigint      NOT NULL REFERENCES owner_notifications (id) ON DELETE CASCADE,
    filename        text        NOT NULL,
    size            bigint      NOT NULL,
    uploaded_at     timestamptz NOT NULL
);
CREATE INDEX owner_notification_files_idx ON owner_notification_files (notification_id, uploaded_at);

-- +goose Down
DROP TABLE owner_notification_files;
DROP TABLE owner_notifications;
DROP TABLE link_unlock_failures;
ALTER TABLE files DROP COLUMN download_count;
ALTER TABLE packages DROP COLUMN notify_owner, DROP COLUMN max_downloads, DROP COLUMN password_hash;
