-- +goose Up
-- The audit log as one hash chain (docs/SECURITY.md, "The audit chain"). Every entry
-- gets seq (1, 2, 3, … with no gap), prev_hash (the hash of entry seq - 1, or the anchor)
-- and hash = hex(SHA-256(canonical JSON of the entry || prev_hash)). A BEFORE INSERT
-- trigger links each entry in the transaction that writes it, whoever writes it
-- (gateway, mailer, expiry, scanner, a migration): it takes the one row of
-- audit_chain_head FOR UPDATE and moves it, so entries are numbered in the order their
-- transactions commit and a rolled-back entry leaves no gap. Within one transaction the
-- head is locked once: a group commit of many creations waits for it once.
--
-- The hourly counters of anonymous failures (hour set, counted in hits by
-- INSERT … ON CONFLICT DO UPDATE) are counters, not entries: they stay outside the
-- chain (seq NULL), since an upsert that only counts would otherwise use a number and
-- insert nothing.
--
-- The canonical JSON, which internal/app/audit.Canonical writes the same way in Go:
--   {"seq":N,"created_at":"2006-01-02T15:04:05.000000Z","actor":"…","actor_user_id":N|null,
--    "action":"…","package_id":"uuid"|null,"file_id":"uuid"|null,"recipient_id":"uuid"|null,
--    "ip":"…","user_agent":"…","detail":"…"}
-- keys in that order, no spaces; numbers in decimal; created_at in UTC with six
-- fractional digits; strings escaped as PostgreSQL's to_json escapes them (\" \\ \b \f
-- \n \r \t, other characters below U+0020 as \u00xx, everything else as it is).
ALTER TABLE audit_log
    ADD COLUMN seq       bigint,
    ADD COLUMN prev_hash text,
    ADD COLUMN hash      text;

-- The chain's head: the last entry's seq and hash (0 and 64 zeros before the first).
CREATE TABLE audit_chain_head (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    seq  bigint  NOT NULL,
    hash text    NOT NULL
);

-- The chain's anchor: the seq and hash of the last entry retention removed (0 and 64
-- zeros while none was), so the entries that remain still verify from it. A row of its
-- own, so that retention never waits for the head that writers hold.
CREATE TABLE audit_chain_anchor (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    seq  bigint  NOT NULL,
    hash text    NOT NULL
);

-- When the last audit.checkpoint event was written: the expiry instance whose
-- conditional update moves it publishes the next one (SHIPFILE_AUDIT_CHECKPOINT).
CREATE TABLE audit_checkpoints (
    one boolean     PRIMARY KEY DEFAULT true CHECK (one),
    at  timestamptz NOT NULL
);
INSERT INTO audit_checkpoints (at) VALUES ('-infinity');

-- +goose StatementBegin
CREATE FUNCTION audit_canonical(e audit_log) RETURNS text LANGUAGE sql STABLE AS $$
SELECT '{"seq":' || e.seq::text
    || ',"created_at":' || to_json(to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text
    || ',"actor":' || to_json(e.actor)::text
    || ',"actor_user_id":' || coalesce(e.actor_user_id::text, 'null')
    || ',"action":' || to_json(e.action)::text
    || ',"package_id":' || coalesce(to_json(e.package_id::text)::text, 'null')
    || ',"file_id":' || coalesce(to_json(e.file_id::text)::text, 'null')
    || ',"recipient_id":' || coalesce(to_json(e.recipient_id::text)::text, 'null')
    || ',"ip":' || to_json(e.ip)::text
    || ',"user_agent":' || to_json(e.user_agent)::text
    || ',"detail":' || to_json(e.detail)::text
    || '}'
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION audit_hash(e audit_log) RETURNS text LANGUAGE sql STABLE AS $$
SELECT encode(sha256(convert_to(audit_canonical(e) || e.prev_hash, 'UTF8')), 'hex')
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION audit_chain_link() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- Existing entries are chained in the order they were written.
LOCK TABLE audit_log IN EXCLUSIVE MODE;
-- +goose StatementBegin
DO $$
DECLARE
    r    audit_log;
    prev text := repeat('0', 64);
    n    bigint := 0;
BEGIN
    FOR r IN SELECT * FROM audit_log WHERE hour IS NULL ORDER BY id LOOP
        n := n + 1;
        r.seq := n;
        r.prev_hash := prev;
        r.hash := audit_hash(r);
        UPDATE audit_log SET seq = r.seq, prev_hash = r.prev_hash, hash = r.hash WHERE id = r.id;
        prev := r.hash;
    END LOOP;
    INSERT INTO audit_chain_head (seq, hash) VALUES (n, prev);
    INSERT INTO audit_chain_anchor (seq, hash) VALUES (0, repeat('0', 64));
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_chain_link BEFORE INSERT ON audit_log
FOR EACH ROW EXECUTE FUNCTION audit_chain_link();
CREATE UNIQUE INDEX audit_log_seq_idx ON audit_log (seq) WHERE seq IS NOT NULL;

-- Legal holds (docs/API.md, "Legal holds"): a package, or every package of a user,
-- that expiry, deletion, file removal and audit retention leave alone while the hold
-- is not released.
CREATE TABLE legal_holds (
    id          uuid PRIMARY KEY,
    package_id  uuid,
    user_id     bigint,
    reason      text        NOT NULL,
    created_by  bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    released_by bigint,
    released_at timestamptz,
    CHECK ((package_id IS NULL) <> (user_id IS NULL))
);
CREATE INDEX legal_holds_package_idx ON legal_holds (package_id) WHERE released_at IS NULL AND package_id IS NOT NULL;
CREATE INDEX legal_holds_user_idx ON legal_holds (user_id) WHERE released_at IS NULL AND user_id IS NOT NULL;

-- +goose StatementBegin
-- package_on_hold says whether a hold not released covers the package (its own, or its
-- owner's).
CREATE FUNCTION package_on_hold(pkg uuid) RETURNS boolean LANGUAGE sql STABLE AS $$
SELECT EXISTS (
    SELECT 1 FROM legal_holds h
    WHERE h.released_at IS NULL
      AND (h.package_id = pkg
           OR h.user_id = (SELECT p.owner_user_id FROM packages p WHERE p.id = pkg))
)
$$;
-- +goose StatementEnd

-- packages.on_hold: whether a hold not released covers the package, kept by the
-- triggers below (a hold placed or released; a package created by a held user), so
-- that reading a package and refusing a change need no look-up of the holds.
ALTER TABLE packages ADD COLUMN on_hold boolean NOT NULL DEFAULT false;

-- +goose StatementBegin
CREATE FUNCTION legal_holds_apply() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER legal_holds_apply AFTER INSERT OR UPDATE OF released_at ON legal_holds
FOR EACH ROW EXECUTE FUNCTION legal_holds_apply();

-- +goose StatementBegin
CREATE FUNCTION packages_hold_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.on_hold := EXISTS (SELECT 1 FROM legal_holds h WHERE h.released_at IS NULL AND h.user_id = NEW.owner_user_id);
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER packages_hold_on_insert BEFORE INSERT ON packages
FOR EACH ROW EXECUTE FUNCTION packages_hold_on_insert();

-- While held, a package is neither deleted nor expired, and none of its files removed,
-- whoever asks (owner, admin, the expiry service, a script): the statement fails with
-- SQLSTATE SH409, which the gateway answers 409 "on legal hold".
-- +goose StatementBegin
CREATE FUNCTION refuse_while_held() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'files' THEN
        IF EXISTS (SELECT 1 FROM packages p WHERE p.id = OLD.package_id AND p.on_hold) THEN
            RAISE EXCEPTION 'on legal hold' USING ERRCODE = 'SH409';
        END IF;
        RETURN OLD;
    END IF;
    IF OLD.on_hold AND (TG_OP = 'DELETE' OR (NEW.state = 'expired' AND OLD.state <> 'expired')) THEN
        RAISE EXCEPTION 'on legal hold' USING ERRCODE = 'SH409';
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER packages_refuse_while_held BEFORE DELETE OR UPDATE OF state ON packages
FOR EACH ROW WHEN (OLD.on_hold) EXECUTE FUNCTION refuse_while_held();
CREATE TRIGGER files_refuse_while_held BEFORE DELETE ON files
FOR EACH ROW EXECUTE FUNCTION refuse_while_held();

-- +goose StatementBegin
-- audit_remove_before is the retention sweep (SHIPFILE_AUDIT_RETENTION, run by the
-- expiry service): it removes up to max_rows entries written before cutoff and returns
-- how many. The hourly counters go by their time; chained entries go from the front of
-- the chain only, in seq order, and the sweep stops at the first entry that is younger
-- or belongs to a package or user under a legal hold, so what remains is one stretch.
-- The last entry removed becomes the anchor, in the same transaction, so the rest
-- still verifies. The anchor's row lock keeps two sweeps apart.
CREATE FUNCTION audit_remove_before(cutoff timestamptz, max_rows int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    anchor    audit_chain_anchor%ROWTYPE;
    last_seq  bigint;
    last_hash text;
    n         int;
    m         int;
BEGIN
    DELETE FROM audit_log WHERE id IN (
        SELECT id FROM audit_log
        WHERE seq IS NULL AND created_at < cutoff
        ORDER BY created_at
        LIMIT max_rows
        FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n >= max_rows THEN
        RETURN n;
    END IF;
    SELECT * INTO anchor FROM audit_chain_anchor FOR UPDATE;
    SELECT r.seq, r.hash INTO last_seq, last_hash
    FROM (
        SELECT c.seq, c.hash, bool_and(c.removable) OVER (ORDER BY c.seq) AS prefix
        FROM (
            SELECT a.seq, a.hash,
                   a.created_at < cutoff
                   AND NOT (a.package_id IS NOT NULL AND package_on_hold(a.package_id))
                   AND NOT (a.actor_user_id IS NOT NULL AND EXISTS (
                       SELECT 1 FROM legal_holds h WHERE h.released_at IS NULL AND h.user_id = a.actor_user_id)) AS removable
            FROM audit_log a
            WHERE a.seq > anchor.seq
            ORDER BY a.seq
            LIMIT max_rows - n
        ) c
    ) r
    WHERE r.prefix
    ORDER BY r.seq DESC
    LIMIT 1;
    IF last_seq IS NULL THEN
        RETURN n;
    END IF;
    DELETE FROM audit_log WHERE seq > anchor.seq AND seq <= last_seq;
    GET DIAGNOSTICS m = ROW_COUNT;
    UPDATE audit_chain_anchor SET seq = last_seq, hash = last_hash;
    RETURN n + m;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION audit_remove_before(timestamptz, int);
DROP TRIGGER files_refuse_while_held ON files;
DROP TRIGGER packages_refuse_while_held ON packages;
DROP FUNCTION refuse_while_held();
DROP TRIGGER packages_hold_on_insert ON packages;
DROP FUNCTION packages_hold_on_insert();
DROP TRIGGER legal_holds_apply ON legal_holds;
DROP FUNCTION legal_holds_apply();
ALTER TABLE packages DROP COLUMN on_hold;
DROP FUNCTION package_on_hold(uuid);
DROP TABLE legal_holds;
DROP TRIGGER audit_chain_link ON audit_log;
DROP FUNCTION audit_chain_link();
DROP FUNCTION audit_hash(audit_log);
DROP FUNCTION audit_canonical(audit_log);
DROP TABLE audit_checkpoints;
DROP TABLE audit_chain_anchor;
DROP TABLE audit_chain_head;
DROP INDEX audit_log_seq_idx;
ALTER TABLE audit_log DROP COLUMN hash, DROP COLUMN prev_hash, DROP COLUMN seq;
