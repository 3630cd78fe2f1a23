-- +goose Up
-- Less WAL per change (issue 21: a package's creation wrote 5.2 times the WAL of a bare
-- INSERT, and its commits queued on the WAL's flushes).
--
-- The outbox keeps a row only until it is published: the relay deletes it then, one small
-- WAL record, where marking it published wrote a new version of the row (its payload
-- again), two index entries, and a day later a delete. Every row left is pending, so the
-- partial index of pending rows is the primary key's work. Rows marked published by an
-- earlier version are still deleted after the relay's retention.
DROP INDEX outbox_unpublished_idx;
-- msg_id is the Nats-Msg-Id: the stream's duplicate window is what drops a message sent
-- twice, and every writer mints a fresh id; the unique index was one more entry a row.
ALTER TABLE outbox DROP CONSTRAINT outbox_msg_id_key;
-- A draft's recipients have no link yet: their NULL link_hash no longer takes an entry in
-- the unique index that finds a package by its link.
ALTER TABLE recipients DROP CONSTRAINT recipients_link_hash_key;
CREATE UNIQUE INDEX recipients_link_hash_key ON recipients (link_hash) WHERE link_hash IS NOT NULL;

-- +goose Down
DROP INDEX recipients_link_hash_key;
ALTER TABLE recipients ADD CONSTRAINT recipients_link_hash_key UNIQUE (link_hash);
ALTER TABLE outbox ADD CONSTRAINT outbox_msg_id_key UNIQUE (msg_id);
CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;
