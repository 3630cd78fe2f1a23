-- +goose Up
-- webhook_order_finish_many (00040_webhook_order_forget.sql) locks the places of the
-- packages it moves on one key at a time.
--
-- It locked them with one join of the call's arrays with webhook_order_heads. The
-- dispatcher runs the function in the transaction of its attempts' group commit, under
-- generic plans, and a PL/pgSQL function keeps the plans of its statements for the
-- session: a join planned while webhook_order_heads was small stayed a scan of the whole
-- table as it grew (one row per ordered subscription and package), and took most of the
-- function's time. A lookup of one place by its primary key is an index lookup in any
-- plan. The locks are taken in the same order as before, so concurrent calls still do not
-- deadlock.
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
    -- The places that exist, locked in (subscription, package) order, each by its key.
    had := '{}';
    FOR r IN
        SELECT u.i, u.s, p_pkgs[u.i] AS p FROM unnest(p_subs) WITH ORDINALITY AS u (s, i)
        ORDER BY u.s, p_pkgs[u.i]
    LOOP
        PERFORM 1 FROM webhook_order_heads h
        WHERE h.subscription_id = r.s AND h.package_id = r.p
        FOR UPDATE;
        IF FOUND THEN
            had := had || r.i::int;
        END IF;
    END LOOP;
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

-- +goose Down
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
