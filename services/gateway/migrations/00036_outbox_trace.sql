-- +goose Up
-- The W3C trace context (traceparent, and tracestate when there is one) of the change that
-- wrote the row, as a JSON object of those fields; the relay sets them as the message's
-- NATS headers, so that its consumers continue the change's trace. NULL when the writer
-- had no trace context.
ALTER TABLE outbox ADD COLUMN trace jsonb;

-- +goose Down
ALTER TABLE outbox DROP COLUMN trace;
