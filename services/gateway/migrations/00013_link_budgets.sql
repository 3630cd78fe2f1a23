-- +goose Up
-- The download limit as a byte budget (docs/API.md, "Download limit"). Each file has, per link,
-- max_downloads × its size (an empty file: max_downloads, one per whole copy) to give;
-- taken is what the link's answers have taken of it: each answer takes the bytes it
-- will send when it starts (one conditional UPDATE, so gateways never take past the
-- budget together) and gives back what it did not send when it ends. A row is keyed by
-- the link (today the package's link_hash; issue 22's per-recipient links move the key
-- to their own rows); files.download_count stays the count of answers from byte 0.
CREATE TABLE link_budgets (
    file_id   uuid   NOT NULL REFERENCES files (id) ON DELETE CASCADE,
    link_hash bytea  NOT NULL,
    taken     bigint NOT NULL DEFAULT 0 CHECK (taken >= 0),
    PRIMARY KEY (file_id, link_hash)
);
-- Downloads counted before the budget took a whole copy each.
INSERT INTO link_budgets (file_id, link_hash, taken)
SELECT f.id, p.link_hash, f.download_count::bigint * GREATEST(f.size, 1)
FROM files f JOIN packages p ON p.id = f.package_id
WHERE p.link_hash IS NOT NULL AND f.download_count > 0;

-- Anonymous failures (docs/API.md, "Hostile clients"): hits of unknown or dead links are one
-- row per action, IP and hour (hour set), counted in hits, not one row per hit.
ALTER TABLE audit_log
    ADD COLUMN hits int NOT NULL DEFAULT 1 CHECK (hits >= 1),
    ADD COLUMN hour timestamptz;
CREATE UNIQUE INDEX audit_log_hourly_idx ON audit_log (action, ip, hour) WHERE hour IS NOT NULL;
-- The retention sweep (SHIPFILE_AUDIT_RETENTION) removes the oldest rows first.
CREATE INDEX audit_log_created_idx ON audit_log (created_at);

-- +goose Down
DROP INDEX audit_log_created_idx;
DROP INDEX audit_log_hourly_idx;
ALTER TABLE audit_log DROP COLUMN hour, DROP COLUMN hits;
DROP TABLE link_budgets;
