package store

// Every SQL statement of the dispatcher. The schema is the gateway's
// (services/gateway/migrations/00004_webhooks.sql).

// qActiveSubscriptionIDs: $1 event type, $2 when the event occurred. A subscription
// gets the events that occur after it was created, not older ones still in the stream
// (a new fan-out consumer starts at the stream's beginning).
const qActiveSubscriptionIDs = `
SELECT id FROM webhook_subscriptions
WHERE active AND $1 = ANY (events) AND created_at <= $2
ORDER BY id`

// qInsertDelivery: $1 id, $2 subscription, $3 event id, $4 event type, $5 body.
const qInsertDelivery = `
INSERT INTO webhook_deliveries (id, subscription_id, event_id, event, body)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT DO NOTHING`

// qDelivery: $1 delivery id.
const qDelivery = `
SELECT d.id::text, d.subscription_id, d.event_id, d.event, d.body, d.status, d.attempts, d.round_attempts,
       s.url, s.secret, s.previous_secret, s.previous_secret_until, s.active, s.failing_since
FROM webhook_deliveries d
JOIN webhook_subscriptions s ON s.id = d.subscription_id
WHERE d.id = $1`

// qMarkFailed: $1 delivery id, $2 reason.
const qMarkFailed = `
UPDATE webhook_deliveries
SET status = 'failed', last_error = $2, updated_at = now()
WHERE id = $1 AND status <> 'succeeded'`

// qSubscriptionAfterAttempt records a subscription's health after an attempt and, when
// $3 (the reason) is not NULL, disables it unless it is disabled already; only while the
// delivery $4 exists (an attempt of a deleted delivery records nothing).
// $1 subscription, $2 succeeded, $3 disable reason or NULL, $4 delivery.
const qSubscriptionAfterAttempt = `
UPDATE webhook_subscriptions SET
    last_success_at = CASE WHEN $2 THEN now() ELSE last_success_at END,
    failing_since   = CASE WHEN $2 THEN NULL ELSE coalesce(failing_since, now()) END,
    disabled_reason = CASE WHEN active AND $3::text IS NOT NULL THEN $3::text ELSE disabled_reason END,
    disabled_at     = CASE WHEN active AND $3::text IS NOT NULL THEN now() ELSE disabled_at END,
    updated_at      = CASE WHEN active AND $3::text IS NOT NULL THEN now() ELSE updated_at END,
    active          = active AND $3::text IS NULL
WHERE id = $1 AND EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $4::uuid)`

// qRecordAttempt counts the attempt on its delivery (new state, last answer) and logs it
// in webhook_attempts, in one statement. It returns the attempt's number, or no row
// when the delivery is gone.
// $1 delivery, $2 subscription, $3 status code or NULL, $4 error or NULL, $5 status,
// $6 duration in ms, $7 response excerpt or NULL.
const qRecordAttempt = `
WITH d AS (
    UPDATE webhook_deliveries SET
        attempts         = attempts + 1,
        round_attempts   = round_attempts + 1,
        last_status_code = $3::int,
        last_error       = $4::text,
        status           = $5,
        updated_at       = now()
    WHERE id = $1::uuid
    RETURNING attempts
)
INSERT INTO webhook_attempts (delivery_id, subscription_id, attempt, status_code, error, duration_ms, response_excerpt)
SELECT $1::uuid, $2::bigint, d.attempts, $3::int, $4::text, $6::int, $7::text FROM d
RETURNING attempt`

// qOldestPending returns the age in seconds of the oldest pending delivery, or 0.
const qOldestPending = `
SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
FROM webhook_deliveries
WHERE status = 'pending'`
