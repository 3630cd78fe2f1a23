package store

import "github.com/shipfile/shipfile/pkg/lifecycle"

// The mailer's SQL. The gateway owns the schema (services/gateway/migrations); these
// statements use mail_deliveries and audit_log.

// qEnsureDelivery records a job at first sight, in its own short transaction, so that
// the locking transaction that follows never waits for another instance's insert.
const qEnsureDelivery = `
INSERT INTO mail_deliveries (job_id, package_id, kind, recipient_email)
VALUES ($1, $2, $3, $4)
ON CONFLICT (job_id) DO NOTHING`

// qLockDelivery locks a job's record for one attempt; NOWAIT fails at once (55P03)
// while another instance holds it.
const qLockDelivery = `
SELECT state, attempts FROM mail_deliveries WHERE job_id = $1 FOR UPDATE NOWAIT`

// qPackageState reads the state of a job's package at $2 (the mailer's clock); no row
// when it was deleted. An overdue package counts as expired before the expiry service
// gets to it: lifecycle.EffectiveStateSQL, the rule every service shares.
var qPackageState = `
SELECT ` + lifecycle.EffectiveStateSQL("", "$2") + `
FROM packages WHERE id = $1`

// qRecordAttempt writes an attempt's outcome.
const qRecordAttempt = `
UPDATE mail_deliveries
SET state      = @state,
    attempts   = attempts + @attempted,
    last_error = @last_error,
    message_id = CASE WHEN @message_id::text <> '' THEN @message_id ELSE message_id END,
    sent_at    = CASE WHEN @state = 'sent' THEN now() ELSE sent_at END,
    updated_at = now()
WHERE job_id = @job_id`

// qInsertAudit writes a system entry of the package's audit log.
const qInsertAudit = `
INSERT INTO audit_log (actor, action, package_id, detail)
VALUES ('system', $1, $2, $3)`
