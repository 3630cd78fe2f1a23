-- +goose Up
-- packages.on_hold (00033_audit_chain.sql) under concurrent writers. Two triggers keep it:
-- legal_holds_apply, when a hold is placed or released, updates the packages the hold
-- covers; packages_hold_on_insert sets it on a new package from its owner's holds. Under
-- READ COMMITTED neither sees what the other's open transaction writes, so on their own a
-- user's hold placed while one of the user's packages is being created would miss the
-- new package (and the package the hold), and a release racing a creation would leave the
-- new package held. Two writers of holds on one owner's packages would miss each other
-- the same way: a release's UPDATE that waits for the row a new package hold updated
-- re-evaluates its EXISTS with the snapshot it started with, blind to that hold.
--
-- So the writers of one owner take turns on an advisory lock keyed by the owner (the
-- two-key form, apart from every one-key advisory lock: hashtext('shipfile legal holds'),
-- hashtext(owner id); the constant is folded when PL/pgSQL plans the statement):
--   - a package creation takes it shared before it reads the holds: creations never wait
--     for each other, only for a hold of their owner being placed or released;
--   - placing or releasing a hold (a user's, or a package's, keyed by its owner) takes it
--     exclusive before its UPDATE, and so waits for the owner's creations in flight.
-- Each holds it until its transaction ends. The statement after the lock takes a new
-- snapshot (READ COMMITTED; each statement of a VOLATILE PL/pgSQL function takes its
-- own), so it sees what the transaction it waited for committed: the hold's UPDATE finds
-- the new package, the new package finds the hold (or its release).
--
-- The cost to a creation is one shared lock in PostgreSQL's lock table, in memory, per
-- created package (one per owner and transaction: a second package of the same owner
-- in a transaction finds the lock held).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION legal_holds_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    owner_id bigint := NEW.user_id;
BEGIN
    IF owner_id IS NULL THEN
        SELECT p.owner_user_id INTO owner_id FROM packages p WHERE p.id = NEW.package_id;
    END IF;
    IF owner_id IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(hashtext('shipfile legal holds'), hashtext(owner_id::text));
    END IF;
    UPDATE packages p SET on_hold = EXISTS (
        SELECT 1 FROM legal_holds h
        WHERE h.released_at IS NULL AND (h.package_id = p.id OR h.user_id = p.owner_user_id))
    WHERE (NEW.package_id IS NOT NULL AND p.id = NEW.package_id)
       OR (NEW.user_id IS NOT NULL AND p.owner_user_id = NEW.user_id);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION packages_hold_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtext('shipfile legal holds'), hashtext(NEW.owner_user_id::text));
    NEW.on_hold := EXISTS (SELECT 1 FROM legal_holds h WHERE h.released_at IS NULL AND h.user_id = NEW.owner_user_id);
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION packages_hold_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.on_hold := EXISTS (SELECT 1 FROM legal_holds h WHERE h.released_at IS NULL AND h.user_id = NEW.owner_user_id);
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION legal_holds_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE packages p SET on_hold = EXISTS (
        SELECT 1 FROM legal_holds h
        WHERE h.released_at IS NULL AND (h.package_id = p.id OR h.user_id = p.owner_user_id))
    WHERE (NEW.package_id IS NOT NULL AND p.id = NEW.package_id)
       OR (NEW.user_id IS NOT NULL AND p.owner_user_id = NEW.user_id);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
