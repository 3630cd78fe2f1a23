-- Every SQL statement of the dispatcher, compiled by sqlc (sqlc.yaml; make generate)
-- against the gateway's schema (services/gateway/migrations: 00004_webhooks.sql,
-- 00007_webhook_throughput.sql). Nothing here that runs once per delivery writes or
-- locks a webhook_subscriptions row. Arrays of delivery ids are passed as text and
-- cast to uuid in SQL (pgx has no binary encoding of a Go string as a uuid: it would
-- try, format the whole array into an error, and send it again as text).

-- name: Subscriptions :many
-- Every subscription, for the dispatcher's cache. The same columns as Subscription.
SELECT id, url, events, secret, previous_secret, previous_secret_until, active, created_at,
       max_in_flight, rate_limit, ordering
FROM webhook_subscriptions ORDER BY id;

-- name: Subscription :one
SELECT id, url, events, secret, previous_secret, previous_secret_until, active, created_at,
       max_in_flight, rate_limit, ordering
FROM webhook_subscriptions WHERE id = $1;

-- name: LastSubscriptionID :one
-- The highest subscription id, 0 when there is none.
SELECT coalesce(max(id), 0)::bigint FROM webhook_subscriptions;

-- name: InsertDeliveries :exec
-- Inserts many deliveries without attempts in one statement (the arrays are zipped:
-- set-returning functions in one select list advance together); a delivery of an
-- event to a subscription that exists already is left alone. For tests and tools:
-- the dispatcher writes a delivery's row with its first attempt (RecordAttempts).
INSERT INTO webhook_deliveries (id, subscription_id, event_id, event, body)
SELECT unnest(@ids::text[])::uuid, unnest(@subscription_ids::bigint[]), unnest(@event_ids::text[]),
       unnest(@events::text[]), unnest(@bodies::bytea[])
ON CONFLICT DO NOTHING;

-- name: Deliveries :many
SELECT id, subscription_id, event_id, event, body, status, attempts, round_attempts, created_at,
       coalesce(package_id, '')::text AS package_id, coalesce(package_seq, 0)::bigint AS package_seq
FROM webhook_deliveries
WHERE id = ANY (CAST(@ids::text[] AS uuid[]));

-- name: StoredDeliveries :many
-- The ids among @ids whose delivery has a row.
SELECT id::text FROM webhook_deliveries
WHERE id = ANY (CAST(@ids::text[] AS uuid[]));

-- name: MarkFailed :execrows
-- Sets a delivery that has not succeeded failed with @reason, without an attempt (its
-- subscription is disabled), writing its row if it has none yet (a delivery's row is
-- written with its first attempt).
INSERT INTO webhook_deliveries AS w (id, subscription_id, event_id, event, body, status, last_error, created_at,
                                     package_id, package_seq)
VALUES (@id, @subscription_id, @event_id, @event, @body, 'failed', @reason::text, @created_at,
        nullif(@package_id::text, ''), nullif(@package_seq::bigint, 0))
ON CONFLICT (id) DO UPDATE SET status = 'failed', last_error = excluded.last_error, updated_at = now()
WHERE w.status <> 'succeeded';

-- name: RecordAttempts :many
-- Writes many attempts and their deliveries' new states (last answer, counters) in one
-- statement (a group commit), and returns each attempt's delivery and number. A
-- delivery's row is written with its first attempt (one write per delivery, no
-- insert-then-update); a later attempt updates it. The arrays are zipped (one element
-- per attempt; a delivery appears once): event_id, event, body, created_at and the
-- package's id and event number (X-Service-Sequence) are used only when the row is new; a status code 0 (no answer) and an error '' are stored as
-- NULL, an excerpt only where has_response.
WITH r AS (
    SELECT unnest(@delivery_ids::text[])::uuid AS delivery_id,
           unnest(@subscription_ids::bigint[]) AS subscription_id,
           unnest(@event_ids::text[]) AS event_id,
           unnest(@events::text[]) AS event,
           unnest(@bodies::bytea[]) AS body,
           unnest(@created_ats::timestamptz[]) AS created_at,
           nullif(unnest(@status_codes::int[]), 0) AS status_code,
           nullif(unnest(@errors::text[]), '') AS error,
           unnest(@statuses::text[]) AS status,
           unnest(@durations_ms::int[]) AS duration_ms,
           unnest(@excerpts::text[]) AS excerpt,
           unnest(@has_response::boolean[]) AS has_response,
           nullif(unnest(@package_ids::text[]), '') AS package_id,
           nullif(unnest(@package_seqs::bigint[]), 0) AS package_seq
), d AS (
    INSERT INTO webhook_deliveries AS w (id, subscription_id, event_id, event, body, status, attempts,
                                         round_attempts, last_status_code, last_error, created_at,
                                         package_id, package_seq)
    SELECT delivery_id, subscription_id, event_id, event, body, status, 1, 1, status_code, error, created_at,
           package_id, package_seq
    FROM r
    ON CONFLICT (id) DO UPDATE SET
        attempts         = w.attempts + 1,
        round_attempts   = w.round_attempts + 1,
        last_status_code = excluded.last_status_code,
        last_error       = excluded.last_error,
        status           = excluded.status,
        updated_at       = now()
    RETURNING w.id, w.attempts
)
INSERT INTO webhook_attempts (delivery_id, subscription_id, attempt, status_code, error, duration_ms, response_excerpt)
SELECT r.delivery_id, r.subscription_id, d.attempts, r.status_code, r.error, r.duration_ms,
       CASE WHEN r.has_response THEN r.excerpt END
FROM r JOIN d ON d.id = r.delivery_id
RETURNING delivery_id, attempt;

-- name: DisableSubscription :exec
-- Disables an active subscription (a 410 Gone: rare). The table's trigger tells every
-- dispatcher.
UPDATE webhook_subscriptions
SET active = false, disabled_reason = @reason::text, disabled_at = now(), updated_at = now()
WHERE id = @id AND active;

-- name: HealthLock :one
-- Makes one health pass run at a time across the instances.
SELECT pg_try_advisory_xact_lock(hashtext('shipfile_webhooks_health'));

-- name: Health :exec
-- Derives each subscription's last_success_at and failing_since from the attempts of
-- the last @health_window (longer than the pass period, so passes overlap; the result does
-- not depend on how often an attempt is seen). failing_since is the first failure
-- after the last success (not before failures_counted_from); an open streak is kept.
-- One scan of the window finds each subscription's last success; its first failure
-- after that is one lookup in webhook_attempts_failed_idx (00026), which holds the
-- failed attempts only. (Reading the window again for each subscription made a pass
-- cost subscriptions × attempts.) The failure test is the index's predicate, word for
-- word, so that the planner can use it.
WITH a AS (
    SELECT subscription_id, max(created_at) FILTER (WHERE status_code BETWEEN 200 AND 299) AS last_ok
    FROM webhook_attempts
    WHERE created_at > now() - @health_window::interval
    GROUP BY subscription_id
), h AS (
    SELECT s.id, greatest(s.last_success_at, a.last_ok) AS last_ok, s.failing_since, s.failures_counted_from
    FROM webhook_subscriptions s JOIN a ON a.subscription_id = s.id
), f AS (
    SELECT h.id, h.last_ok,
           CASE WHEN h.failing_since > coalesce(h.last_ok, '-infinity') THEN h.failing_since
                ELSE (SELECT min(w.created_at) FROM webhook_attempts w
                      WHERE w.subscription_id = h.id
                        AND (w.status_code IS NULL OR w.status_code NOT BETWEEN 200 AND 299)
                        AND w.created_at > now() - @health_window::interval
                        AND w.created_at > coalesce(h.last_ok, '-infinity')
                        AND w.created_at >= coalesce(h.failures_counted_from, '-infinity'))
           END AS failing_since
    FROM h
)
UPDATE webhook_subscriptions s SET last_success_at = f.last_ok, failing_since = f.failing_since
FROM f
WHERE s.id = f.id
  AND (s.last_success_at IS DISTINCT FROM f.last_ok OR s.failing_since IS DISTINCT FROM f.failing_since);

-- name: DisableFailing :many
-- Disables the active subscriptions failing since @failing_for or longer, with
-- @reason, and returns their ids.
UPDATE webhook_subscriptions
SET active = false, disabled_reason = @reason::text, disabled_at = now(), updated_at = now()
WHERE active AND failing_since <= now() - @failing_for::interval
RETURNING id;

-- name: DeleteDeliveriesOf :execrows
-- Removes the deliveries (and, by the trigger of 00021, their attempts) of the subscriptions among
-- @subscription_ids that no longer exist.
DELETE FROM webhook_deliveries d
WHERE d.subscription_id = ANY (@subscription_ids::bigint[])
  AND NOT EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.id = d.subscription_id);

-- name: Heartbeat :one
-- Records @instance_id as alive, forgets instances not seen for @ttl and counts the
-- other live ones.
WITH up AS (
    INSERT INTO webhook_dispatchers (instance_id, seen_at) VALUES (@instance_id::text, now())
    ON CONFLICT (instance_id) DO UPDATE SET seen_at = now()
), gone AS (
    DELETE FROM webhook_dispatchers WHERE webhook_dispatchers.seen_at < now() - @ttl::interval
)
SELECT count(*) FROM webhook_dispatchers
WHERE webhook_dispatchers.instance_id <> @instance_id::text AND webhook_dispatchers.seen_at >= now() - @ttl::interval;

-- name: Leave :exec
-- Forgets instance @instance_id (a clean stop).
DELETE FROM webhook_dispatchers WHERE instance_id = @instance_id;

-- name: OldestPending :one
-- The age in seconds of the oldest pending delivery, or 0.
SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
FROM webhook_deliveries
WHERE status = 'pending';

-- name: RemoveOldAttempts :execrows
-- Removes the attempts older than @retention_secs by the database's clock
-- (SHIPFILE_WEBHOOK_LOG_RETENTION) among the @max_rows oldest by id, skipping rows
-- another instance's sweep holds. Ids grow with time: the primary key hands out the
-- oldest, so a batch reads @max_rows rows whatever the table's size, and one that
-- removes fewer has reached the attempts to keep.
DELETE FROM webhook_attempts WHERE id IN (
    SELECT o.id FROM (
        SELECT a.id, a.created_at FROM webhook_attempts a
        ORDER BY a.id
        LIMIT @max_rows
        FOR UPDATE SKIP LOCKED
    ) o
    WHERE o.created_at < now() - make_interval(secs => @retention_secs::float8)
);

-- name: RemoveOldDeliveries :execrows
-- Removes up to @max_rows deliveries created and last changed more than @retention_secs
-- ago and not pending, oldest first within each subscription
-- (webhook_deliveries_subscription_idx; those of a deleted subscription went with it).
-- Their attempts are older still (each attempt sets its delivery's updated_at), so
-- RemoveOldAttempts removes them: this runs in a transaction that set
-- shipfile.attempts_removed (00027), so that the trigger of 00021 does not look for
-- them in the whole attempts table.
DELETE FROM webhook_deliveries WHERE id IN (
    SELECT o.id FROM webhook_subscriptions s CROSS JOIN LATERAL (
        SELECT d.id FROM webhook_deliveries d
        WHERE d.subscription_id = s.id
          AND d.created_at < now() - make_interval(secs => @retention_secs::float8)
          AND d.updated_at < now() - make_interval(secs => @retention_secs::float8)
          AND d.status <> 'pending'
        ORDER BY d.created_at
        LIMIT @max_rows
    ) o
    LIMIT @max_rows
);

-- name: MarkAttemptsRemoved :exec
-- Tells the trigger of 00021, for the rest of the transaction, that the attempts of the
-- deliveries it removes are gone already (00027).
SELECT set_config('shipfile.attempts_removed', 'on', true);

-- name: OrderGate :one
-- May the event @seq of package @package_id go to the ordered subscription
-- @subscription_id now? (webhook_order_gate, migration 00031: 'go', 'late', 'wait' or
-- 'skip'.) @delivery_id is empty for an event the subscription does not take; otherwise a
-- 'wait' writes the delivery's row (pending, no attempt) from the fields after it.
-- released: the delivery a 'skip' released, empty when none.
SELECT g.decision::text AS decision, coalesce(g.p_released::text, '')::text AS released
FROM webhook_order_gate(@subscription_id::bigint, @package_id::text, @seq::bigint,
                        nullif(@delivery_id::text, '')::uuid, @event_id::text, @event::text, @body::bytea,
                        @created_at::timestamptz) g;

-- name: OrderFinish :one
-- The event @seq of package @package_id is done for subscription @subscription_id
-- (delivered, failed for good): returns the delivery that may go next, empty when none
-- waits yet (webhook_order_finish, migration 00031).
SELECT coalesce(webhook_order_finish(@subscription_id::bigint, @package_id::text, @seq::bigint)::text, '')::text;

-- name: StalledReleases :many
-- The released deliveries of ordered subscriptions not attempted @after their release
-- (the instance that released one stopped before it told the others), marked released
-- again now, up to @max_rows.
UPDATE webhook_order_waits w SET released_at = now()
FROM (
    SELECT o.subscription_id, o.package_id, o.seq
    FROM webhook_order_waits o JOIN webhook_deliveries d ON d.id = o.delivery_id
    WHERE o.released_at < now() - @after::interval
      AND d.status = 'pending' AND d.attempts = 0
    ORDER BY o.released_at
    LIMIT @max_rows
    FOR UPDATE OF o SKIP LOCKED
) s
WHERE w.subscription_id = s.subscription_id AND w.package_id = s.package_id AND w.seq = s.seq
RETURNING w.subscription_id, w.delivery_id::text AS delivery_id;

-- name: UnstickOrder :many
-- Moves the packages of ordered subscriptions whose next event has not come for @after
-- past it, up to @max_rows packages, and returns the deliveries that go next
-- (webhook_order_unstick, migration 00031).
SELECT u.subscription_id::bigint AS subscription_id, u.delivery_id::text AS delivery_id
FROM webhook_order_unstick(@after::interval, @max_rows::int) u;

-- name: ReleaseUnordered :many
-- Removes up to @max_rows waiting entries of subscriptions no longer ordered (or gone)
-- and returns the waiting deliveries of those that still exist: they go as they come.
WITH gone AS (
    DELETE FROM webhook_order_waits w
    WHERE (w.subscription_id, w.package_id, w.seq) IN (
        SELECT o.subscription_id, o.package_id, o.seq FROM webhook_order_waits o
        WHERE NOT EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.id = o.subscription_id AND s.ordering = 'package')
        LIMIT @max_rows)
    RETURNING w.subscription_id, w.delivery_id
)
SELECT g.subscription_id, g.delivery_id::text AS delivery_id FROM gone g
WHERE g.delivery_id IS NOT NULL AND EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.id = g.subscription_id);

-- name: RemoveUnorderedHeads :execrows
-- Removes up to @max_rows packages' places in the order of subscriptions that are no
-- longer ordered, or among @deleted (deleted subscriptions).
-- One index range per such subscription, not a scan of every head.
DELETE FROM webhook_order_heads h
WHERE (h.subscription_id, h.package_id) IN (
    SELECT o.subscription_id, o.package_id
    FROM unnest(array(SELECT s.id FROM webhook_subscriptions s WHERE s.ordering <> 'package') || @deleted::bigint[]) AS x (id)
    CROSS JOIN LATERAL (
        SELECT o.subscription_id, o.package_id FROM webhook_order_heads o
        WHERE o.subscription_id = x.id
        LIMIT @max_rows
    ) o
    LIMIT @max_rows);

-- name: ForgetDoneOrder :execrows
-- Removes up to @max_rows places in the order of packages with nothing left to do for
-- their subscription: every event of the package numbered so far is done for it (next_seq
-- is past the package's counter), nothing of it waits or is pending, and the place has not
-- moved for @after. The package's order_done_seq records how far it was done, so that its
-- next event, if one ever comes, starts there (webhook_order_gate, migration 00040). The
-- places and the counters are locked, skipping those another transaction holds: an event
-- being numbered keeps its package's places.
WITH done AS (
    SELECT h.subscription_id, h.package_id, e.seq
    FROM webhook_order_heads h
    JOIN package_event_seqs e ON e.package_id = h.package_id
    WHERE h.updated_at < now() - @after::interval
      AND h.next_seq > e.seq
      AND NOT EXISTS (SELECT 1 FROM webhook_order_waits w
                      WHERE w.subscription_id = h.subscription_id AND w.package_id = h.package_id)
      AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d
                      WHERE d.subscription_id = h.subscription_id AND d.package_id = h.package_id
                        AND d.status = 'pending' AND d.package_seq IS NOT NULL)
    LIMIT @max_rows
    FOR UPDATE OF h, e SKIP LOCKED
), marked AS (
    UPDATE package_event_seqs e SET order_done_seq = m.seq
    FROM (SELECT done.package_id, max(done.seq) AS seq FROM done GROUP BY done.package_id) m
    WHERE e.package_id = m.package_id AND e.order_done_seq IS DISTINCT FROM m.seq
)
DELETE FROM webhook_order_heads h
USING done
WHERE h.subscription_id = done.subscription_id AND h.package_id = done.package_id;

-- name: OrderFinishMany :one
-- OrderFinish of many (webhook_order_finish_many), in the group commit of attempts:
-- the released deliveries, empty where none, in the order given.
SELECT webhook_order_finish_many(@subscription_ids::bigint[], @package_ids::text[], @seqs::bigint[])::text[];

-- name: OrderHeads :many
-- The next event of each (@subscription_ids[i], @package_ids[i]) that has a place in the
-- order, by i (1-based); a read, for the gates of many deliveries at once.
SELECT u.i::int AS i, h.next_seq
FROM unnest(@subscription_ids::bigint[]) WITH ORDINALITY AS u (s, i)
JOIN webhook_order_heads h ON h.subscription_id = u.s AND h.package_id = (@package_ids::text[])[u.i];
