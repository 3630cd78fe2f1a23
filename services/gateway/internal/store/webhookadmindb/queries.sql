-- Webhook administration (internal/app/webhookadmin): the subscriptions, their
-- secrets, redelivery and the attempt log the admin reads. The dispatcher
-- (services/webhooks) writes the deliveries and attempts.

-- name: InsertWebhook :one
-- events NULL: every event type, those added later included.
INSERT INTO webhook_subscriptions (url, description, events, secret, active, max_in_flight, rate_limit, created_at, updated_at)
VALUES (@url, @description, @events, @secret, @active, @max_in_flight, @rate_limit, @created_at, @updated_at)
RETURNING *;

-- name: ListWebhooks :many
SELECT * FROM webhook_subscriptions ORDER BY id;

-- name: GetWebhook :one
SELECT * FROM webhook_subscriptions WHERE id = $1;

-- name: LockWebhook :one
SELECT * FROM webhook_subscriptions WHERE id = $1 FOR UPDATE;

-- name: HoldWebhook :one
-- Keeps the subscription from being deleted until the transaction ends, without
-- blocking the dispatcher's updates of its delivery state.
SELECT id FROM webhook_subscriptions WHERE id = $1 FOR KEY SHARE;

-- name: SaveWebhook :one
-- last_success_at belongs to the dispatcher alone.
UPDATE webhook_subscriptions SET
    url                   = @url,
    description           = @description,
    events                = @events,
    secret                = @secret,
    previous_secret       = @previous_secret,
    previous_secret_until = @previous_secret_until,
    active                = @active,
    disabled_reason       = @disabled_reason,
    disabled_at           = @disabled_at,
    failing_since         = @failing_since,
    failures_counted_from = @failures_counted_from,
    max_in_flight         = @max_in_flight,
    rate_limit            = @rate_limit,
    updated_at            = @updated_at
WHERE id = @id
RETURNING *;

-- name: DeleteWebhook :execrows
DELETE FROM webhook_subscriptions WHERE id = $1;

-- name: DeleteWebhookDeliveries :execrows
-- No foreign key ties deliveries to their subscription (00007): they go with it, and
-- their attempts with them.
DELETE FROM webhook_deliveries WHERE subscription_id = $1;

-- name: RedeliverWebhookDelivery :execrows
UPDATE webhook_deliveries SET status = 'pending', round_attempts = 0, updated_at = now()
WHERE id = @id AND subscription_id = @subscription_id;

-- name: StaleWebhookSecrets :many
-- Pages the subscriptions with a secret not sealed under the key whose prefix is
-- @prefix (plaintext or another key), by id after @after_id.
SELECT id, secret, previous_secret FROM webhook_subscriptions
WHERE id > @after_id AND (left(secret, length(@prefix::text)) <> @prefix::text OR left(previous_secret, length(@prefix::text)) <> @prefix::text)
ORDER BY id LIMIT @max_rows;

-- name: ResealWebhookSecret :execrows
-- Replaces a subscription's secrets only if they are still what was read (compare and
-- swap): another gateway starting at once, or a rotation meanwhile, wins and the row
-- is left to it.
UPDATE webhook_subscriptions SET secret = @secret, previous_secret = @previous_secret
WHERE id = @id AND secret = @old_secret::text AND previous_secret IS NOT DISTINCT FROM sqlc.narg(old_previous_secret)::text;

-- name: ListWebhookAttempts :many
SELECT a.id, a.delivery_id, d.event_id, d.event, a.attempt, a.status_code, a.error, a.duration_ms,
       a.response_excerpt, a.created_at, d.status AS delivery_status
FROM webhook_attempts a
JOIN webhook_deliveries d ON d.id = a.delivery_id
WHERE a.subscription_id = @subscription_id
  AND (@before_id::bigint = 0 OR a.id < @before_id)
ORDER BY a.id DESC
LIMIT @max_rows;

-- name: SetWebhookOrdering :one
-- Sets a subscription's ordering ('none' or 'package', migration 00031), and when it
-- becomes 'package' since when, and returns its row. The table's trigger tells every
-- dispatcher when it changed.
UPDATE webhook_subscriptions
SET ordering = @ordering::text,
    ordered_since = CASE WHEN @ordering::text = 'package' AND ordering <> 'package' THEN now() ELSE ordered_since END
WHERE id = @id
RETURNING *;
