-- +goose Up
-- The places of finished packages leave the order of ordered webhook deliveries
-- (00031_webhook_ordering.sql; docs/WEBHOOKS.md, "Ordered delivery").
--
-- webhook_order_heads holds a row per ordered subscription and package. The dispatcher
-- removes the row of a package with nothing left to do for the subscription: every event
-- of the package numbered so far is done for it (next_seq is past package_event_seqs.seq),
-- nothing of it waits or is pending, and the row has not moved for a long time (far longer
-- than a delivery's retry schedule, so every subscription is done with those events too).
-- It writes how far the package was done in package_event_seqs.order_done_seq (NULL: no
-- row of the package was removed), in the statement that removes the rows and under the
-- lock of the package's counter, so no event is numbered in between. A package without a
-- row then starts after order_done_seq rather than at its first event: its next event goes
-- at once, a later one waits for it, and an earlier one (a redelivery) goes as late.
ALTER TABLE package_event_seqs ADD COLUMN order_done_seq bigint;

-- webhook_order_finish: as in 00031; a package without a place gets one after p_seq or
-- after order_done_seq, whichever is later.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_order_finish(p_sub bigint, p_pkg text, p_seq bigint) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    head bigint;
    nxt  bigint;
    del  uuid;
BEGIN
    SELECT next_seq INTO head FROM webhook_order_heads
    WHERE subscription_id = p_sub AND package_id = p_pkg FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO webhook_order_heads (subscription_id, package_id, next_seq)
        VALUES (p_sub, p_pkg, greatest(p_seq, coalesce((SELECT e.order_done_seq FROM package_event_seqs e WHERE e.package_id = p_pkg), 0)) + 1)
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

-- webhook_order_finish_many: as in 00031; a package that had no place when the call
-- locked the places gets one after its event or after order_done_seq, whichever is later
-- (a place that exists moves past the event only when the event is its next).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_order_finish_many(p_subs bigint[], p_pkgs text[], p_seqs bigint[]) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    n    int := coalesce(array_length(p_subs, 1), 0);
    out  text[];
    slow int[];
    had  int[];
    r    record;
BEGIN
    IF n = 0 THEN
        RETURN '{}';
    END IF;
    out := array_fill(''::text, ARRAY[n]);
    -- The places that exist, locked in the caller's order.
    SELECT coalesce(array_agg(x.i), '{}') INTO had FROM (
        SELECT u.i FROM webhook_order_heads h
        JOIN unnest(p_subs) WITH ORDINALITY AS u (s, i) ON h.subscription_id = u.s AND h.package_id = p_pkgs[u.i]
        ORDER BY h.subscription_id, h.package_id
        FOR UPDATE OF h) x;
    -- Packages with events waiting, or twice in the call, go one by one.
    SELECT array_agg(x.i) INTO slow FROM (
        SELECT u.i, u.s, p_pkgs[u.i] AS p, count(*) OVER (PARTITION BY u.s, p_pkgs[u.i]) AS c
        FROM unnest(p_subs) WITH ORDINALITY AS u (s, i)) x
    WHERE x.c > 1
       OR EXISTS (SELECT 1 FROM webhook_order_waits w WHERE w.subscription_id = x.s AND w.package_id = x.p);
    slow := coalesce(slow, '{}');
    -- The others: each package's place moves past its event, or is made after it.
    INSERT INTO webhook_order_heads AS h (subscription_id, package_id, next_seq)
    SELECT u.s, p_pkgs[u.i],
           CASE WHEN u.i = ANY (had) THEN p_seqs[u.i] + 1
                ELSE greatest(p_seqs[u.i], coalesce((SELECT e.order_done_seq FROM package_event_seqs e WHERE e.package_id = p_pkgs[u.i]), 0)) + 1
           END
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

-- webhook_order_gate: as in 00031; a package without a place starts after its
-- order_done_seq (its first events are done for every subscription), at the earliest at
-- its first event when that was written after the subscription became ordered (or is not
-- on record), else at p_seq.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_order_gate(p_sub bigint, p_pkg text, p_seq bigint, p_delivery uuid,
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
        SELECT CASE WHEN p.first_at IS NULL OR p.first_at >= coalesce(s.ordered_since, s.created_at)
                    THEN coalesce(p.order_done_seq, 0) + 1
                    ELSE greatest(p_seq, coalesce(p.order_done_seq, 0) + 1) END
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

-- +goose Down
-- The functions of 00031, then the column they no longer read.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_order_finish(p_sub bigint, p_pkg text, p_seq bigint) RETURNS uuid
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
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_order_finish_many(p_subs bigint[], p_pkgs text[], p_seqs bigint[]) RETURNS text[]
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
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_order_gate(p_sub bigint, p_pkg text, p_seq bigint, p_delivery uuid,
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
ALTER TABLE package_event_seqs DROP COLUMN order_done_seq;
