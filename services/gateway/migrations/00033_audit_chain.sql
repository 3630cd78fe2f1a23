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

-- +goose Down
DROP FUNCTION package_on_hold(uuid);
DROP TABLE legal_holds;
DROP TRIGGER audit_chain_link ON audit_log;
DROP FUNCTION audit_chain_link();
DROP FUNCTION audit_hash(audit_log);
DROP FUNCTION audit_canonical(audit_log);
DROP TABLE audit_chain_anchor;
DROP TABLE audit_chain_head;
DROP INDEX audit_log_seq_idx;
ALTER TABLE audit_log DROP COLUMN hash, DROP COLUMN prev_hash, DROP COLUMN seq;
