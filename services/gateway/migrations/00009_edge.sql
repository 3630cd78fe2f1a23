-- +goose Up
-- The link routes' request rate per client IP, shared by every gateway instance
-- (GCRA: tat is the theoretical arrival time of the next request). Unlogged: the
-- counts are worth nothing after a crash, and skipping the WAL keeps each hit cheap.
CREATE UNLOGGED TABLE link_rate (
    client text PRIMARY KEY,
    tat    timestamptz NOT NULL
);

-- +goose Down
DROP TABLE link_rate;
