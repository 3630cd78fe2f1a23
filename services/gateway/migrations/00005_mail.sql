-- +goose Up
-- One row per mail job (the MailJob's job_id), written by the mailer. A job whose row
-- is 'sent' or 'failed' is never sent again, so a redelivered job costs no second
-- e-mail. The mailer holds the row lock while it talks to the SMTP server, so two
-- instances never send one job at the same time.
CREATE TABLE mail_deliveries (
    job_id          uuid PRIMARY KEY,
    -- No foreign key: the record outlives a deleted package, like the audit log.
    package_id      uuid        NOT NULL,
    kind            text        NOT NULL CHECK (kind IN ('outbound', 'inbound')),
    recipient_email text        NOT NULL,
    -- pending: attempted, will be retried; sent: accepted by the SMTP server;
    -- failed: rejected for good (5xx) or out of retries.
    state           text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed')),
    attempts        int         NOT NULL DEFAULT 0,
    -- The last SMTP reply or connection error; never the magic link.
    last_error      text        NOT NULL DEFAULT '',
    -- The Message-ID header of the e-mail sent.
    message_id      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
);
CREATE INDEX mail_deliveries_package_idx ON mail_deliveries (package_id, created_at);

-- What happened, in words, for entries that need more than an action name: the
-- recipient of an e-mail, an SMTP server's rejection.
ALTER TABLE audit_log ADD COLUMN detail text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE audit_log DROP COLUMN detail;
DROP TABLE mail_deliveries;
