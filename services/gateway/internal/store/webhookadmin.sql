-- The webhook administration's statements beyond queries.sql's (sqlc.yaml; make
-- generate), against the gateway's schema.

-- name: SetWebhookOrdering :one
-- Sets a subscription's ordering ('none' or 'package', migration 00031), and when it
-- becomes 'package' since when, and returns its row. The table's trigger tells every
-- dispatcher when it changed.
UPDATE webhook_subscriptions
SET ordering = @ordering::text,
    ordered_since = CASE WHEN @ordering::text = 'package' AND ordering <> 'package' THEN now() ELSE ordered_since END
WHERE id = @id
RETURNING *;
