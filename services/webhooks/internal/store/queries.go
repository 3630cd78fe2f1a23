package store

// Every SQL statement of the dispatcher. The schema is the gateway's
// (services/gateway/migrations: 00004_webhooks.sql, 00007_webhook_throughput.sql).
// Nothing here that runs once per delivery writes or locks a webhook_subscriptions row.

// subscriptionColumns are the columns scanSubscription reads, in its order.
const subscriptionColumns = `id, url, events, secret, previous_secret, previous_secret_until, active, created_at,
       max_in_flight, rate_limit`

// qSubscriptions: every subscription, for the dispatcher's cache.
const qSubscriptions = `SELECT ` + subscriptionColumns + ` FROM webhook_subscriptions ORDER BY id`

// qSubscription: $1 subscription id.
const qSubscription = `SELECT ` + subscriptionColumns + ` FROM webhook_subscriptions WHERE id = $1`

// qInsertDeliveries inserts many deliveries in one statement; a delivery of an event
// to a subscription that exists already is left alone.
// $1 ids, $2 subscriptions, $3 event ids, $4 event types, $5 bodies.
const qInsertDeliveries = `
INSERT INTO webhook_deliveries (id, subscription_id, event_id, event, body)
SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::bytea[])
ON CONFLICT DO NOTHING`

// qDeliveries: $1 delivery ids.
const qDeliveries = `
SELECT id::text, subscription_id, event_id, event, body, status, attempts, round_attempts
FROM webhook_deliveries
WHERE id = ANY ($1::uuid[])`

// qMarkFailed: $1 delivery id, $2 reason.
const qMarkFailed = `
UPDATE webhook_deliveries
SET status = 'failed', last_error = $2, updated_at = now()
WHERE id = $1 AND status <> 'succeeded'`

// qRecordAttempts counts many attempts on their deliveries (new state, last answer) and
// logs them in webhook_attempts, in one statement (a group commit). It returns each
// attempt's delivery and number; a delivery that is gone returns no row.
// $1 deliveries, $2 subscriptions, $3 status codes (NULL: no answer), $4 errors,
// $5 statuses, $6 durations in ms, $7 response excerpts. A delivery appears once.
const qRecordAttempts = `
WITH r AS (
    SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::int[], $4::text[], $5::text[], $6::int[], $7::text[])
        AS r (delivery_id, subscription_id, status_code, error, status, duration_ms, excerpt)
), d AS (
    UPDATE webhook_deliveries w SET
        attempts         = w.attempts + 1,
        round_attempts   = w.round_attempts + 1,
        last_status_code = r.status_code,
        last_error       = r.error,
        status           = r.status,
        updated_at       = now()
    FROM r
    WHERE w.id = r.delivery_id
    RETURNING w.id, w.attempts
)
INSERT INTO webhook_attempts (delivery_id, subscription_id, attempt, status_code, error, duration_ms, response_excerpt)
SELECT r.delivery_id, r.subscription_id, d.attempts, r.status_code, r.error, r.duration_ms, r.excerpt
FROM r JOIN d ON d.id = r.delivery_id
RETURNING delivery_id::text, attempt`

// qDisableSubscription disables an active subscription (a 410 Gone: rare). The
// table's trigger tells every dispatcher. $1 subscription, $2 reason.
const qDisableSubscription = `
UPDATE webhook_subscriptions
SET active = false, disabled_reason = $2, disabled_at = now(), updated_at = now()
WHERE id = $1 AND active`

// qHealthLock makes one health pass run at a time across the instances.
const qHealthLock = `SELECT pg_try_advisory_xact_lock(hashtext('shipfile_webhooks_health'))`

// qHealth derives each subscription's last_success_at and failing_since from the
// attempts of the last $1 (an interval longer than the pass period, so passes overlap;
// the result does not depend on how often an attempt is seen). failing_since is the
// first failure after the last success (not before failures_counted_from); an open
// streak is kept.
const qHealth = `
WITH win AS MATERIALIZED (
    SELECT subscription_id, created_at, coalesce(status_code BETWEEN 200 AND 299, false) AS ok
    FROM webhook_attempts
    WHERE created_at > now() - $1::interval
), a AS (
    SELECT subscription_id, max(created_at) FILTER (WHERE ok) AS last_ok
    FROM win GROUP BY subscription_id
), h AS (
    SELECT s.id, greatest(s.last_success_at, a.last_ok) AS last_ok, s.failing_since, s.failures_counted_from
    FROM webhook_subscriptions s JOIN a ON a.subscription_id = s.id
), f AS (
    SELECT h.id, h.last_ok,
           CASE WHEN h.failing_since > coalesce(h.last_ok, '-infinity') THEN h.failing_since
                ELSE (SELECT min(win.created_at) FROM win
                      WHERE win.subscription_id = h.id AND NOT win.ok
                        AND win.created_at > coalesce(h.last_ok, '-infinity')
                        AND win.created_at >= coalesce(h.failures_counted_from, '-infinity'))
           END AS failing_since
    FROM h
)
UPDATE webhook_subscriptions s SET last_success_at = f.last_ok, failing_since = f.failing_since
FROM f
WHERE s.id = f.id
  AND (s.last_success_at IS DISTINCT FROM f.last_ok OR s.failing_since IS DISTINCT FROM f.failing_since)`

// qDisableFailing disables the active subscriptions failing since $1 (an interval)
// or longer, with reason $2, and returns their ids.
const qDisableFailing = `
UPDATE webhook_subscriptions
SET active = false, disabled_reason = $2, disabled_at = now(), updated_at = now()
WHERE active AND failing_since <= now() - $1::interval
RETURNING id`

// qDeleteDeliveriesOf removes the deliveries (and, by cascade, the attempts) of
// subscriptions that no longer exist. $1 subscription ids.
const qDeleteDeliveriesOf = `
DELETE FROM webhook_deliveries d
WHERE d.subscription_id = ANY ($1::bigint[])
  AND NOT EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.id = d.subscription_id)`

// qHeartbeat records instance $1 as alive, forgets instances not seen for $2 (an
// interval) and counts the other live ones.
const qHeartbeat = `
WITH up AS (
    INSERT INTO webhook_dispatchers (instance_id, seen_at) VALUES ($1, now())
    ON CONFLICT (instance_id) DO UPDATE SET seen_at = now()
), gone AS (
    DELETE FROM webhook_dispatchers WHERE seen_at < now() - $2::interval
)
SELECT count(*) FROM webhook_dispatchers WHERE instance_id <> $1 AND seen_at >= now() - $2::interval`

// qLeave forgets instance $1 (a clean stop).
const qLeave = `DELETE FROM webhook_dispatchers WHERE instance_id = $1`

// qOldestPending returns the age in seconds of the oldest pending delivery, or 0.
const qOldestPending = `
SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
FROM webhook_deliveries
WHERE status = 'pending'`
