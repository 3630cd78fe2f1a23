-- +goose NO TRANSACTION
-- +goose Up
-- The webhook health pass (services/webhooks Health, every few seconds) finds a
-- subscription's first failure after its last success. It read the whole window of
-- attempts (a minute, 600,000 rows at 10,000 deliveries/s) once per subscription with
-- attempts in it: with 200 subscriptions a pass took 6 s, longer than its period. This
-- index holds the failed attempts only (most attempts succeed, and a success adds no
-- entry), so each subscription's first failure is one index lookup.
-- CONCURRENTLY: webhook_attempts is the largest table, and the dispatchers write to it
-- all the time; a plain CREATE INDEX would hold their attempts for the whole build. A
-- build that failed leaves an invalid index of that name, which goes first.
DROP INDEX CONCURRENTLY IF EXISTS webhook_attempts_failed_idx;
CREATE INDEX CONCURRENTLY webhook_attempts_failed_idx ON webhook_attempts (subscription_id, created_at)
WHERE status_code IS NULL OR status_code NOT BETWEEN 200 AND 299;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_attempts_failed_idx;
