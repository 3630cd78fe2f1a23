-- +goose Up
-- Scanning fails closed: a file clamd could not judge (over its limits, encrypted, too
-- deep, timed out) is 'unscannable', never 'clean'. In block mode an 'unscannable' or
-- 'error' file is held until the package's owner releases it; the file records who did
-- and when.
ALTER TABLE files DROP CONSTRAINT files_scan_check;
ALTER TABLE files ADD CONSTRAINT files_scan_check
    CHECK (scan IN ('pending', 'clean', 'infected', 'error', 'unscannable', 'skipped'));
ALTER TABLE files
    ADD COLUMN scan_released_by bigint REFERENCES users (id) ON DELETE SET NULL,
    ADD COLUMN scan_released_at timestamptz;

-- +goose Down
ALTER TABLE files DROP COLUMN scan_released_at, DROP COLUMN scan_released_by;
UPDATE files SET scan = 'error' WHERE scan = 'unscannable';
ALTER TABLE files DROP CONSTRAINT files_scan_check;
ALTER TABLE files ADD CONSTRAINT files_scan_check
    CHECK (scan IN ('pending', 'clean', 'infected', 'error', 'skipped'));
