-- +goose Up
-- Ordered webhook delivery per package (proto/openapi.yaml WebhookOrdering; docs/ARCHITECTURE.md,
-- "The data path of a webhook delivery").
--
-- 1. Every package event gets its package's next number (1, 2, …) where it is written:
--    a trigger on the outbox, in the writer's transaction, so the numbers follow the
--    order in which the package's changes commit, whoever writes them (gateway, expiry,
--    scanner). The counter's row is locked until the writer commits, so two changes of one
--    package take their numbers one after the other. The number travels in the event as
--    Envelope.package_seq (proto/events/v1/events.proto, field 5): a protobuf field
--    appended to the encoded message, which a parser reads like any other field. The
--    dispatcher sends it as X-Service-Sequence. One row per package; it stays when the
--    package goes (a few bytes), so a number is never handed out twice. first_at is
--    when its first event was written.
CREATE TABLE package_event_seqs (
    package_id text        PRIMARY KEY,
    seq        bigint      NOT NULL,
    first_at   timestamptz NOT NULL DEFAULT now()
);

-- The package id of an encoded eventsv1.Envelope: the first field (Package) of its data
-- (fields 10 and up), whose first field is package_id. NULL for anything else (a
-- payload that is not an envelope, an event without a package): never an error, so a
-- malformed payload is published as it is.
-- +goose StatementBegin
CREATE FUNCTION shipfile_event_package_id(payload bytea) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    hi    int := length(payload); -- the end of the message being read
    pos   int := 0;
    depth int := 0;               -- 0: the envelope, 1: its data, 2: the data's Package
    v     bigint;
    shift int;
    b     int;
    field bigint;
    wire  int;
BEGIN
    WHILE pos < hi LOOP
        v := 0; shift := 0;
        LOOP
            IF pos >= hi OR shift > 56 THEN RETURN NULL; END IF;
            b := get_byte(payload, pos); pos := pos + 1;
            v := v | ((b & 127)::bigint << shift);
            EXIT WHEN b < 128;
            shift := shift + 7;
        END LOOP;
        field := v >> 3; wire := (v & 7)::int;
        IF wire = 0 THEN
            LOOP
                IF pos >= hi THEN RETURN NULL; END IF;
                b := get_byte(payload, pos); pos := pos + 1;
                EXIT WHEN b < 128;
            END LOOP;
        ELSIF wire = 1 THEN
            pos := pos + 8;
        ELSIF wire = 5 THEN
            pos := pos + 4;
        ELSIF wire = 2 THEN
            v := 0; shift := 0;
            LOOP
                IF pos >= hi OR shift > 56 THEN RETURN NULL; END IF;
                b := get_byte(payload, pos); pos := pos + 1;
                v := v | ((b & 127)::bigint << shift);
                EXIT WHEN b < 128;
                shift := shift + 7;
            END LOOP;
            IF v < 0 OR pos + v > hi THEN RETURN NULL; END IF;
            IF (depth = 0 AND field >= 10) OR (depth = 1 AND field = 1) THEN
                depth := depth + 1; hi := pos + v::int; -- read inside it
                CONTINUE;
            ELSIF depth = 2 AND field = 1 THEN
                RETURN convert_from(substring(payload FROM pos + 1 FOR v::int), 'UTF8');
            END IF;
            pos := pos + v::int;
        ELSE
            RETURN NULL;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION outbox_package_seq() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    pkg text := shipfile_event_package_id(NEW.payload);
    n   bigint;
    tail bytea := '\x28'::bytea; -- field 5, varint
BEGIN
    IF pkg IS NULL OR pkg = '' THEN
        RETURN NEW;
    END IF;
    INSERT INTO package_event_seqs AS c (package_id, seq) VALUES (pkg, 1)
    ON CONFLICT (package_id) DO UPDATE SET seq = c.seq + 1
    RETURNING c.seq INTO n;
    WHILE n >= 128 LOOP
        tail := tail || set_byte('\x00'::bytea, 0, ((n & 127) | 128)::int);
        n := n >> 7;
    END LOOP;
    NEW.payload := NEW.payload || tail || set_byte('\x00'::bytea, 0, n::int);
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_package_seq BEFORE INSERT ON outbox
FOR EACH ROW WHEN (NEW.subject LIKE 'shipfile.events.package.%' AND NOT NEW.ephemeral AND NEW.payload IS NOT NULL)
EXECUTE FUNCTION outbox_package_seq();

-- 2. A subscription's ordering: 'none', or 'package' (a later event of a package waits
--    while an earlier one of the same package is being delivered or retried). It
--    matters to the dispatchers, so a change is pushed to them (00007's trigger, with
--    ordering added). ordered_since is when it last became 'package' (NULL: at its
--    creation): a package whose first event is later has all its events pass through
--    the order.
ALTER TABLE webhook_subscriptions
    ADD COLUMN ordering text NOT NULL DEFAULT 'none' CHECK (ordering IN ('none', 'package')),
    ADD COLUMN ordered_since timestamptz;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_subscriptions_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('shipfile_webhooks', OLD.id::text);
        RETURN OLD;
    END IF;
    IF TG_OP = 'INSERT'
       OR NEW.url IS DISTINCT FROM OLD.url
       OR NEW.events IS DISTINCT FROM OLD.events
       OR NEW.secret IS DISTINCT FROM OLD.secret
       OR NEW.previous_secret IS DISTINCT FROM OLD.previous_secret
       OR NEW.previous_secret_until IS DISTINCT FROM OLD.previous_secret_until
       OR NEW.active IS DISTINCT FROM OLD.active
       OR NEW.max_in_flight IS DISTINCT FROM OLD.max_in_flight
       OR NEW.rate_limit IS DISTINCT FROM OLD.rate_limit
       OR NEW.ordering IS DISTINCT FROM OLD.ordering
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        PERFORM pg_notify('shipfile_webhooks', NEW.id::text);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- 3. A delivery of a package's event carries the package and the event's number
--    (X-Service-Sequence; NULL for events without them).
ALTER TABLE webhook_deliveries ADD COLUMN package_id text, ADD COLUMN package_seq bigint;

-- 4. The order of an ordered subscription's deliveries, per package, kept by every
--    dispatcher instance together: next_seq is the number of the package's event that
--    may be delivered now (the earlier ones are done: delivered, failed for good, or not
--    for this subscription). A later event waits in webhook_order_waits (a delivery,
--    or NULL for an event the subscription does not take) until next_seq reaches it.
--    Both rows are locked by one function call at a time (webhook_order_gate,
--    webhook_order_finish), so a wait and the release that ends it never cross.
CREATE TABLE webhook_order_heads (
    subscription_id bigint      NOT NULL,
    package_id      text        NOT NULL,
    next_seq        bigint      NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (subscription_id, package_id)
);
CREATE TABLE webhook_order_waits (
    subscription_id bigint      NOT NULL,
    package_id      text        NOT NULL,
    seq             bigint      NOT NULL,
    delivery_id     uuid,
    -- When next_seq reached it and the dispatcher was told to send it; NULL until then.
    released_at     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (subscription_id, package_id, seq)
);
-- The released deliveries, for the dispatchers' check that each was sent.
CREATE INDEX webhook_order_waits_released_idx ON webhook_order_waits (released_at) WHERE released_at IS NOT NULL;
-- The pending deliveries of package events (few: most deliveries are written with a
-- first attempt that succeeded), for the check that a package's next event is under way.
CREATE INDEX webhook_deliveries_package_pending_idx ON webhook_deliveries (subscription_id, package_id, package_seq)
WHERE status = 'pending' AND package_seq IS NOT NULL;

-- webhook_order_finish: the event p_seq of package p_pkg is done for subscription
-- p_sub. When it is the one next_seq names, next_seq moves past it and past the waiting
-- events the subscription does not take, up to the next waiting delivery, which is
-- marked released and returned (NULL: none waits yet). A package without a place yet
-- (nothing of it ever waited: its first event goes without one) gets one after p_seq.
-- Otherwise nothing changes.
-- +goose StatementBegin
CREATE FUNCTION webhook_order_finish(p_sub bigint, p_pkg text, p_seq bigint) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    head bigint;
    nxt  bigint;
    del  uuid;
BEGIN
    SELECT next_seq INTO head FROM webhook_order_heads
    WHERE subscription_id = p_sub AND package_id = p_pkg FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO webhook_order_heads (subscription_id, package_id, next_seq) VALUES (p_sub, p_pkg, p_seq + 1)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            RETURN NULL;
        END IF;
        SELECT next_seq INTO head FROM webhook_order_heads
        WHERE subscription_id = p_sub AND package_id = p_pkg FOR UPDATE;
    END IF;
    IF head <> p_seq THEN
        RETURN NULL;
    END IF;
    DELETE FROM webhook_order_waits WHERE subscription_id = p_sub AND package_id = p_pkg AND seq = p_seq;
    nxt := p_seq + 1;
    LOOP
        SELECT delivery_id INTO del FROM webhook_order_waits
        WHERE subscription_id = p_sub AND package_id = p_pkg AND seq = nxt;
        EXIT WHEN NOT FOUND;
        IF del IS NOT NULL THEN
            UPDATE webhook_order_waits SET released_at = now()
            WHERE subscription_id = p_sub AND package_id = p_pkg AND seq = nxt;
            EXIT;
        END IF;
        DELETE FROM webhook_order_waits WHERE subscription_id = p_sub AND package_id = p_pkg AND seq = nxt;
        nxt := nxt + 1;
    END LOOP;
    UPDATE webhook_order_heads SET next_seq = nxt, updated_at = now()
    WHERE subscription_id = p_sub AND package_id = p_pkg;
    RETURN del;
END
$$;
-- +goose StatementEnd

-- webhook_order_release: the package's next waiting delivery, from next_seq on (past
-- the waiting events the subscription does not take), marked released and returned;
-- NULL when the next is not waiting (under way, released already, or not come).
-- +goose StatementBegin
CREATE FUNCTION webhook_order_release(p_sub bigint, p_pkg text) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    nxt bigint;
    del uuid;
    rel timestamptz;
BEGIN
    SELECT next_seq INTO nxt FROM webhook_order_heads
    WHERE subscription_id = p_sub AND package_id = p_pkg FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    LOOP
        SELECT delivery_id, released_at INTO del, rel FROM webhook_order_waits
        WHERE subscription_id = p_sub AND package_id = p_pkg AND seq = nxt;
        EXIT WHEN NOT FOUND;
        IF del IS NOT NULL THEN
            IF rel IS NOT NULL THEN
                del := NULL;
            ELSE
                UPDATE webhook_order_waits SET released_at = now()
                WHERE subscription_id = p_sub AND package_id = p_pkg AND seq = nxt;
            END IF;
            EXIT;
        END IF;
        DELETE FROM webhook_order_waits WHERE subscription_id = p_sub AND package_id = p_pkg AND seq = nxt;
        nxt := nxt + 1;
    END LOOP;
    UPDATE webhook_order_heads SET next_seq = nxt, updated_at = now()
    WHERE subscription_id = p_sub AND package_id = p_pkg AND next_seq <> nxt;
    RETURN del;
END
$$;
-- +goose StatementEnd

-- webhook_order_finish_many: webhook_order_finish of each (p_subs[i], p_pkgs[i],
-- p_seqs[i]), in one statement of the dispatcher's group commit of attempts (the caller
-- sorts them by subscription and package, so that concurrent calls lock in one order);
-- returns the released deliveries, '' where none, in the same order. The packages
-- without waiting events (most) move on in one statement; the others one by one.
-- +goose StatementBegin
CREATE FUNCTION webhook_order_finish_many(p_subs bigint[], p_pkgs text[], p_seqs bigint[]) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    n    int := coalesce(array_length(p_subs, 1), 0);
    out  text[];
    slow int[];
    r    record;
BEGIN
    IF n = 0 THEN
        RETURN '{}';
    END IF;
    out := array_fill(''::text, ARRAY[n]);
    -- The places that exist, locked in the caller's order.
    PERFORM 1 FROM webhook_order_heads h
    JOIN unnest(p_subs) WITH ORDINALITY AS u (s, i) ON h.subscription_id = u.s AND h.package_id = p_pkgs[u.i]
    ORDER BY h.subscription_id, h.package_id
    FOR UPDATE OF h;
    -- Packages with events waiting, or twice in the call, go one by one.
    SELECT array_agg(x.i) INTO slow FROM (
        SELECT u.i, u.s, p_pkgs[u.i] AS p, count(*) OVER (PARTITION BY u.s, p_pkgs[u.i]) AS c
        FROM unnest(p_subs) WITH ORDINALITY AS u (s, i)) x
    WHERE x.c > 1
       OR EXISTS (SELECT 1 FROM webhook_order_waits w WHERE w.subscription_id = x.s AND w.package_id = x.p);
    slow := coalesce(slow, '{}');
    -- The others: each package's place moves past its event, or is made after it.
    INSERT INTO webhook_order_heads AS h (subscription_id, package_id, next_seq)
    SELECT u.s, p_pkgs[u.i], p_seqs[u.i] + 1
    FROM unnest(p_subs) WITH ORDINALITY AS u (s, i)
    WHERE u.i <> ALL (slow)
    ORDER BY u.i
    ON CONFLICT (subscription_id, package_id) DO UPDATE SET next_seq = excluded.next_seq, updated_at = now()
    WHERE h.next_seq = excluded.next_seq - 1;
    -- An event that came to wait while this ran (its gate made the place first) is
    -- released: a fresh look at what waits.
    FOR r IN
        SELECT u.i, u.s, p_pkgs[u.i] AS p FROM unnest(p_subs) WITH ORDINALITY AS u (s, i)
        WHERE u.i <> ALL (slow)
          AND EXISTS (SELECT 1 FROM webhook_order_waits w WHERE w.subscription_id = u.s AND w.package_id = p_pkgs[u.i])
    LOOP
        out[r.i] := coalesce(webhook_order_release(r.s, r.p)::text, '');
    END LOOP;
    FOR r IN SELECT x.i FROM unnest(slow) AS x (i) ORDER BY x.i LOOP
        out[r.i] := coalesce(webhook_order_finish(p_subs[r.i], p_pkgs[r.i], p_seqs[r.i])::text, '');
    END LOOP;
    RETURN out;
END
$$;
-- +goose StatementEnd

-- webhook_order_gate: may event p_seq of package p_pkg go to subscription p_sub now?
-- A package seen for the first time starts at its first event when that was written
-- after the subscription became ordered (or is not on record: an event published
-- outside the outbox), since every event of it then reaches the subscription; an older
-- package starts at p_seq. 'go': it is next_seq; 'late': it
-- is before next_seq (a redelivery, or an event that reached the dispatchers after a
-- later one of its package): it goes at once; 'wait': an earlier event is not done, and
-- it waits in webhook_order_waits, its delivery's row written (pending, no attempt:
-- p_delivery and the fields after it) for the release to read; 'skip': the subscription
-- does not take it (p_delivery NULL) and it is next_seq: it is done, and the delivery
-- it releases (or NULL) is p_released.
-- +goose StatementBegin
CREATE FUNCTION webhook_order_gate(p_sub bigint, p_pkg text, p_seq bigint, p_delivery uuid,
                                   p_event_id text, p_event text, p_body bytea, p_created_at timestamptz,
                                   OUT decision text, OUT p_released uuid)
LANGUAGE plpgsql AS $$
DECLARE
    head bigint;
BEGIN
    -- Most events are their package's next: a read decides it, with no lock and no
    -- write (only a finish moves next_seq past p_seq, and that comes after it).
    SELECT next_seq INTO head FROM webhook_order_heads
    WHERE subscription_id = p_sub AND package_id = p_pkg;
    IF FOUND AND p_seq <= head AND (p_seq < head OR p_delivery IS NOT NULL) THEN
        decision := CASE WHEN p_seq < head THEN 'late' ELSE 'go' END;
        RETURN;
    END IF;
    SELECT next_seq INTO head FROM webhook_order_heads
    WHERE subscription_id = p_sub AND package_id = p_pkg FOR UPDATE;
    IF NOT FOUND THEN
        SELECT CASE WHEN p.first_at IS NULL OR p.first_at >= coalesce(s.ordered_since, s.created_at) THEN 1 ELSE p_seq END
        INTO head
        FROM webhook_subscriptions s LEFT JOIN package_event_seqs p ON p.package_id = p_pkg
        WHERE s.id = p_sub;
        INSERT INTO webhook_order_heads (subscription_id, package_id, next_seq) VALUES (p_sub, p_pkg, coalesce(head, p_seq))
        ON CONFLICT DO NOTHING;
        SELECT next_seq INTO head FROM webhook_order_heads
        WHERE subscription_id = p_sub AND package_id = p_pkg FOR UPDATE;
    END IF;
    IF p_seq < head THEN
        decision := 'late';
    ELSIF p_seq = head AND p_delivery IS NULL THEN
        decision := 'skip';
        p_released := webhook_order_finish(p_sub, p_pkg, p_seq);
    ELSIF p_seq = head THEN
        decision := 'go';
    ELSE
        decision := 'wait';
        INSERT INTO webhook_order_waits (subscription_id, package_id, seq, delivery_id)
        VALUES (p_sub, p_pkg, p_seq, p_delivery)
        ON CONFLICT DO NOTHING;
        IF p_delivery IS NOT NULL THEN
            INSERT INTO webhook_deliveries (id, subscription_id, event_id, event, body, created_at, package_id, package_seq)
            VALUES (p_delivery, p_sub, p_event_id, p_event, p_body, p_created_at, p_pkg, p_seq)
            ON CONFLICT (id) DO NOTHING;
        END IF;
    END IF;
END
$$;
-- +goose StatementEnd

-- webhook_order_unstick: the packages of ordered subscriptions whose next event has not
-- come for p_after (its head unchanged that long, no delivery of it waiting or pending)
-- while a later one waits: an event that will never reach the subscription (written
-- while the dispatchers had not yet learnt that it became ordered, or lost). The head
-- moves to the first waiting event, and the delivery released (if any) is returned; up
-- to p_max packages a call.
-- +goose StatementBegin
CREATE FUNCTION webhook_order_unstick(p_after interval, p_max int)
RETURNS TABLE (subscription_id bigint, delivery_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    h record;
    first_waiting bigint;
    released uuid;
BEGIN
    FOR h IN
        -- From the waiting events (few) to their heads (one lookup each), not through
        -- every head.
        SELECT o.subscription_id AS sub, o.package_id AS pkg, o.next_seq
        FROM (SELECT DISTINCT w.subscription_id, w.package_id FROM webhook_order_waits w) k
        JOIN webhook_order_heads o ON o.subscription_id = k.subscription_id AND o.package_id = k.package_id
        WHERE o.updated_at < now() - p_after
          AND EXISTS (SELECT 1 FROM webhook_order_waits w
                      WHERE w.subscription_id = o.subscription_id AND w.package_id = o.package_id AND w.seq > o.next_seq)
          AND NOT EXISTS (SELECT 1 FROM webhook_order_waits w
                          WHERE w.subscription_id = o.subscription_id AND w.package_id = o.package_id AND w.seq = o.next_seq)
          AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d
                          WHERE d.subscription_id = o.subscription_id AND d.package_id = o.package_id
                            AND d.package_seq = o.next_seq AND d.status = 'pending')
        ORDER BY o.updated_at
        LIMIT p_max
        FOR UPDATE OF o SKIP LOCKED
    LOOP
        SELECT min(w.seq) INTO first_waiting FROM webhook_order_waits w
        WHERE w.subscription_id = h.sub AND w.package_id = h.pkg AND w.seq > h.next_seq;
        UPDATE webhook_order_heads o SET next_seq = first_waiting - 1
        WHERE o.subscription_id = h.sub AND o.package_id = h.pkg;
        released := webhook_order_finish(h.sub, h.pkg, first_waiting - 1);
        IF released IS NOT NULL THEN
            subscription_id := h.sub;
            delivery_id := released;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION webhook_order_unstick(interval, int);
DROP FUNCTION webhook_order_finish_many(bigint[], text[], bigint[]);
DROP FUNCTION webhook_order_release(bigint, text);
DROP FUNCTION webhook_order_gate(bigint, text, bigint, uuid, text, text, bytea, timestamptz);
DROP FUNCTION webhook_order_finish(bigint, text, bigint);
DROP TABLE webhook_order_waits;
DROP TABLE webhook_order_heads;
DROP INDEX webhook_deliveries_package_pending_idx;
ALTER TABLE webhook_deliveries DROP COLUMN package_seq, DROP COLUMN package_id;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_subscriptions_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('shipfile_webhooks', OLD.id::text);
        RETURN OLD;
    END IF;
    IF TG_OP = 'INSERT'
       OR NEW.url IS DISTINCT FROM OLD.url
       OR NEW.events IS DISTINCT FROM OLD.events
       OR NEW.secret IS DISTINCT FROM OLD.secret
       OR NEW.previous_secret IS DISTINCT FROM OLD.previous_secret
       OR NEW.previous_secret_until IS DISTINCT FROM OLD.previous_secret_until
       OR NEW.active IS DISTINCT FROM OLD.active
       OR NEW.max_in_flight IS DISTINCT FROM OLD.max_in_flight
       OR NEW.rate_limit IS DISTINCT FROM OLD.rate_limit
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        PERFORM pg_notify('shipfile_webhooks', NEW.id::text);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
ALTER TABLE webhook_subscriptions DROP COLUMN ordered_since, DROP COLUMN ordering;
DROP TRIGGER outbox_package_seq ON outbox;
DROP FUNCTION outbox_package_seq();
DROP FUNCTION shipfile_event_package_id(bytea);
DROP TABLE package_event_seqs;
