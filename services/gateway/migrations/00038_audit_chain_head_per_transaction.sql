-- +goose Up
-- The audit chain's head, looked up and written once per transaction (docs/SECURITY.md,
-- "The audit chain"). Entries are linked exactly as by 00033_audit_chain.sql (the same
-- seq, prev_hash and audit_hash), in the order their transactions commit, with no gap:
--
--   - The first chained entry of a transaction takes the one row of audit_chain_head FOR
--     UPDATE, as before; that row lock is the transaction's until it ends, so no other
--     writer reads the head in between.
--   - The running head (the last entry's seq and hash) then lives in the transaction-local
--     setting shipfile.audit_head ("<xid>/<seq>/<hash>/<queued>", set_config(…, true)),
--     which the transaction's later entries read instead of the row. The transaction id in
--     it ties the value to this transaction: a value left by another one, or set for a
--     whole session, is not read as the head.
--   - A setting made with set_config(…, true) is undone with the subtransaction (savepoint,
--     PL/pgSQL exception block) that made it, like the entries that subtransaction
--     inserted: after ROLLBACK TO SAVEPOINT the setting is again the head of the entries
--     that remain, so the next entry takes the number the rolled-back one had.
--   - The row audit_chain_head is written once, at the end: the deferred constraint
--     trigger audit_chain_head_write runs at commit (or at SET CONSTRAINTS … IMMEDIATE)
--     and moves the row to the running head. It is queued for one entry only: the one
--     whose number <queued> names, the first entry since the head row was last written;
--     its WHEN clause, evaluated as each row is inserted, leaves every other entry
--     without a queued event. A queued event goes with the subtransaction that queued it,
--     as the setting that named it does.
--
-- So one transaction's entries cost one lookup and one update of the head, whatever their
-- number, and the head row gets one version per transaction. A chained entry must be
-- inserted once its BEFORE trigger has run (no INSERT … ON CONFLICT DO NOTHING of chained
-- entries; the hourly counters, hour set, are outside the chain): its number is then
-- taken.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_chain_link() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tx     text := pg_current_xact_id()::text;
    cur    text[] := string_to_array(current_setting('shipfile.audit_head', true), '/');
    queued text := '';
BEGIN
    IF NEW.hour IS NOT NULL THEN
        NEW.seq := NULL;
        NEW.prev_hash := NULL;
        NEW.hash := NULL;
        RETURN NEW;
    END IF;
    IF cur[1] IS NOT DISTINCT FROM tx THEN
        NEW.seq := cur[2]::bigint + 1;
        NEW.prev_hash := cur[3];
        queued := cur[4];
    ELSE
        SELECT h.seq + 1, h.hash INTO NEW.seq, NEW.prev_hash FROM audit_chain_head h FOR UPDATE;
    END IF;
    NEW.hash := audit_hash(NEW);
    IF queued = '' THEN
        queued := NEW.seq::text;
    END IF;
    PERFORM set_config('shipfile.audit_head', tx || '/' || NEW.seq || '/' || NEW.hash || '/' || queued, true);
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION audit_chain_head_write() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    cur text[] := string_to_array(current_setting('shipfile.audit_head', true), '/');
BEGIN
    IF cur[1] IS DISTINCT FROM pg_current_xact_id()::text THEN
        RETURN NULL;
    END IF;
    UPDATE audit_chain_head SET seq = cur[2]::bigint, hash = cur[3];
    PERFORM set_config('shipfile.audit_head', cur[1] || '/' || cur[2] || '/' || cur[3] || '/', true);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER audit_chain_head_write AFTER INSERT ON audit_log
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW
WHEN (NEW.seq IS NOT NULL AND split_part(current_setting('shipfile.audit_head', true), '/', 4) = NEW.seq::text)
EXECUTE FUNCTION audit_chain_head_write();

-- +goose Down
DROP TRIGGER audit_chain_head_write ON audit_log;
DROP FUNCTION audit_chain_head_write();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_chain_link() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    head audit_chain_head%ROWTYPE;
BEGIN
    IF NEW.hour IS NOT NULL THEN
        NEW.seq := NULL;
        NEW.prev_hash := NULL;
        NEW.hash := NULL;
        RETURN NEW;
    END IF;
    SELECT * INTO head FROM audit_chain_head FOR UPDATE;
    NEW.seq := head.seq + 1;
    NEW.prev_hash := head.hash;
    NEW.hash := audit_hash(NEW);
    UPDATE audit_chain_head SET seq = NEW.seq, hash = NEW.hash;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
