-- +goose Up
-- Several recipients, each with a link of their own (docs/API.md, "Several recipients"). A
-- package's links move from columns of the package to rows of their own, one per
-- recipient; packages.recipient_email and recipient_name stay as the first
-- recipient's (what events, the mailer and the expiry service read).
CREATE TABLE recipients (
    id             uuid        PRIMARY KEY,
    package_id     uuid        NOT NULL REFERENCES packages (id) ON DELETE CASCADE,
    -- The recipient's place in the package's list: 0 is the first.
    position       int         NOT NULL CHECK (position >= 0),
    email          text        NOT NULL,
    name           text        NOT NULL DEFAULT '',
    -- SHA-256 of the recipient's magic link; NULL until the package is finalized
    -- (or the recipient added to an active package).
    link_hash      bytea       UNIQUE,
    link_state     text        NOT NULL DEFAULT 'none' CHECK (link_state IN ('none', 'active', 'revoked')),
    use_count      bigint      NOT NULL DEFAULT 0,
    last_used_at   timestamptz,
    -- Answers through the link that started at byte 0 (downloads).
    download_count bigint      NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    revoked_at     timestamptz,
    CHECK ((link_state = 'none') = (link_hash IS NULL)),
    UNIQUE (package_id, position)
);
CREATE UNIQUE INDEX recipients_email_idx ON recipients (package_id, lower(email));

-- Today's links become their recipients' rows, unnoticed: the same hash, so a link
-- handed out keeps working (or stays dead), with its use count and downloads.
INSERT INTO recipients (id, package_id, position, email, name, link_hash, link_state, use_count, last_used_at,
                        download_count, created_at, revoked_at)
SELECT gen_random_uuid(), p.id, 0, p.recipient_email, p.recipient_name, p.link_hash,
       CASE WHEN p.link_hash IS NULL THEN 'none' WHEN p.state = 'revoked' THEN 'revoked' ELSE 'active' END,
       p.link_use_count, p.link_last_used_at,
       coalesce((SELECT sum(f.download_count) FROM files f WHERE f.package_id = p.id), 0),
       p.created_at, CASE WHEN p.state = 'revoked' AND p.link_hash IS NOT NULL THEN p.revoked_at END
FROM packages p;

ALTER TABLE packages DROP COLUMN link_hash, DROP COLUMN link_use_count, DROP COLUMN link_last_used_at;

-- Who uploaded a file through a link (NULL: the owner, or a link of before 00019).
ALTER TABLE files ADD COLUMN recipient_id uuid REFERENCES recipients (id) ON DELETE SET NULL;
UPDATE files f SET recipient_id = r.id FROM recipients r
WHERE f.uploaded_by = 'recipient' AND r.package_id = f.package_id AND r.position = 0;

-- Each link's own downloads of each file (files.download_count stays the total).
ALTER TABLE link_budgets ADD COLUMN download_count int NOT NULL DEFAULT 0 CHECK (download_count >= 0);
UPDATE link_budgets b SET download_count = f.download_count FROM files f WHERE f.id = b.file_id;

-- The link an audit entry was made through (no foreign key: the log outlives packages).
ALTER TABLE audit_log ADD COLUMN recipient_id uuid;
UPDATE audit_log a SET recipient_id = r.id FROM recipients r
WHERE a.actor = 'link' AND a.package_id IS NOT NULL AND r.package_id = a.package_id AND r.position = 0;
CREATE INDEX audit_log_recipient_idx ON audit_log (recipient_id, id DESC) WHERE recipient_id IS NOT NULL;

-- The unlock throttle counts per link.
ALTER TABLE link_unlock_failures ADD COLUMN recipient_id uuid REFERENCES recipients (id) ON DELETE CASCADE;
UPDATE link_unlock_failures u SET recipient_id = r.id FROM recipients r
WHERE r.package_id = u.package_id AND r.position = 0;
CREATE INDEX link_unlock_failures_recipient_idx ON link_unlock_failures (recipient_id, failed_at);

-- The owner's notifications name the recipient whose link was used.
ALTER TABLE owner_notifications ADD COLUMN recipient_email text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE owner_notifications DROP COLUMN recipient_email;
DROP INDEX link_unlock_failures_recipient_idx;
ALTER TABLE link_unlock_failures DROP COLUMN recipient_id;
DROP INDEX audit_log_recipient_idx;
ALTER TABLE audit_log DROP COLUMN recipient_id;
ALTER TABLE link_budgets DROP COLUMN download_count;
ALTER TABLE files DROP COLUMN recipient_id;
ALTER TABLE packages
    ADD COLUMN link_hash bytea UNIQUE,
    ADD COLUMN link_use_count bigint NOT NULL DEFAULT 0,
    ADD COLUMN link_last_used_at timestamptz;
UPDATE packages p SET link_hash = r.link_hash, link_use_count = r.use_count, link_last_used_at = r.last_used_at
FROM recipients r WHERE r.package_id = p.id AND r.position = 0;
DROP TABLE recipients;
