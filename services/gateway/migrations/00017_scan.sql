-- +goose Up
-- Malware scanning (docs/SCANNING.md): the scanner service records one verdict
-- per file. A file starts 'pending'; the scanner moves it once, with a conditional
-- UPDATE (WHERE scan = 'pending'), so a redelivered upload event or a second scanner
-- instance never records a second verdict. Files stored before scanning existed were
-- never scanned: they are 'skipped' (served in every mode), new ones 'pending'.
ALTER TABLE files
    ADD COLUMN scan text NOT NULL DEFAULT 'skipped'
        CHECK (scan IN ('pending', 'clean', 'infected', 'error', 'skipped')),
    -- clamd's name of what it found; '' unless infected.
    ADD COLUMN scan_signature text NOT NULL DEFAULT '',
    ADD COLUMN scanned_at timestamptz;
ALTER TABLE files ALTER COLUMN scan SET DEFAULT 'pending';
-- The scanner's own record of failed attempts of a file (clamd answered an error, the
-- object could not be read), so 'error' is recorded after the retries whichever
-- instance made them.
ALTER TABLE files ADD COLUMN scan_attempts int NOT NULL DEFAULT 0;

-- The owner's e-mail about an infected file: one per file, sent by the mailer like the
-- other owner notifications.
ALTER TABLE owner_notifications DROP CONSTRAINT owner_notifications_kind_check;
ALTER TABLE owner_notifications ADD CONSTRAINT owner_notifications_kind_check
    CHECK (kind IN ('downloaded', 'uploads', 'infected'));
ALTER TABLE owner_notifications
    ADD COLUMN file_id   uuid,
    ADD COLUMN filename  text NOT NULL DEFAULT '',
    ADD COLUMN signature text NOT NULL DEFAULT '';
CREATE UNIQUE INDEX owner_notifications_infected_idx ON owner_notifications (file_id) WHERE kind = 'infected';

-- +goose Down
DROP INDEX owner_notifications_infected_idx;
DELETE FROM owner_notifications WHERE kind = 'infected';
ALTER TABLE owner_notifications DROP COLUMN signature, DROP COLUMN filename, DROP COLUMN file_id;
ALTER TABLE owner_notifications DROP CONSTRAINT owner_notifications_kind_check;
ALTER TABLE owner_notifications ADD CONSTRAINT owner_notifications_kind_check
    CHECK (kind IN ('downloaded', 'uploads'));
ALTER TABLE files DROP COLUMN scan_attempts, DROP COLUMN scanned_at, DROP COLUMN scan_signature, DROP COLUMN scan;
