-- The mailer's SQL, compiled by sqlc (sqlc.yaml; make generate) against the gateway's
-- schema (services/gateway/migrations): mail_deliveries, owner_notifications and
-- owner_notification_files (00012), and audit_log.

-- name: EnsureDelivery :exec
-- Records a job at first sight, in its own short transaction, so that the locking
-- transaction that follows never waits for another instance's insert.
INSERT INTO mail_deliveries (job_id, package_id, kind, recipient_email)
VALUES (@job_id, @package_id, @kind, @recipient_email)
ON CONFLICT (job_id) DO NOTHING;

-- name: LockDelivery :one
-- Locks a job's record for one attempt; NOWAIT fails at once (55P03) while another
-- instance holds it.
SELECT state, attempts FROM mail_deliveries WHERE job_id = $1 FOR UPDATE NOWAIT;

-- name: PackageState :one
-- The state of a job's package at @now (the mailer's clock); no row when it was
-- deleted. An overdue package counts as expired before the expiry service gets to it:
-- the CASE is lifecycle.EffectiveStateSQL, the rule every service shares (a test in
-- package db holds the two equal).
SELECT (CASE WHEN (state <> 'expired' AND expires_at <= @now) THEN 'expired' ELSE state END)::text AS state
FROM packages WHERE id = @id;

-- name: RecordAttempt :exec
-- Writes an attempt's outcome.
UPDATE mail_deliveries
SET state      = @state::text,
    attempts   = attempts + @attempted::int,
    last_error = @last_error,
    message_id = CASE WHEN @message_id::text <> '' THEN @message_id::text ELSE message_id END,
    sent_at    = CASE WHEN @state::text = 'sent' THEN now() ELSE sent_at END,
    updated_at = now()
WHERE job_id = @job_id;

-- name: InsertAudit :exec
-- Writes a system entry of the package's audit log.
INSERT INTO audit_log (actor, action, package_id, detail)
VALUES ('system', @action, @package_id::uuid, @detail);

-- name: RecordDownload :exec
-- Makes the 'downloaded' notification of an outbound package's recipient, due at once,
-- while its owner wants notifications: one per recipient, at their first download
-- (gateway migration 00024); a later download of theirs adds nothing. recipient_email
-- is the address of the recipient whose link was used (the e-mail names them).
INSERT INTO owner_notifications (package_id, kind, state, due_at, recipient_email)
SELECT p.id, 'downloaded', 'pending', now(), @recipient_email::text FROM packages p
WHERE p.id = @package_id AND p.direction = 'outbound' AND p.notify_owner
ON CONFLICT (package_id, lower(recipient_email)) WHERE kind = 'downloaded' DO NOTHING;

-- name: RecordUpload :exec
-- Adds a recipient's upload to their open burst on the package (one per recipient, so
-- the e-mail lists whose files; gateway migration 00023), opening one if none is, and
-- moves its due time to quiet from now; a file already recorded (a redelivered event)
-- changes nothing. The upsert takes the burst's row lock, so a mailer closing the
-- burst meanwhile either sees the new due time or the upload opens a new burst.
WITH pkg AS (
    SELECT p.id FROM packages p
    WHERE p.id = @package_id AND p.direction = 'inbound' AND p.notify_owner
      AND NOT EXISTS (SELECT 1 FROM owner_notification_files WHERE file_id = @file_id::uuid)
), burst AS (
    INSERT INTO owner_notifications (package_id, kind, state, due_at, recipient_email)
    SELECT pkg.id, 'uploads', 'open', now() + make_interval(secs => @quiet_secs::float8), @recipient_email::text FROM pkg
    ON CONFLICT (package_id, lower(recipient_email)) WHERE kind = 'uploads' AND state = 'open'
    DO UPDATE SET due_at = greatest(owner_notifications.due_at, excluded.due_at), updated_at = now()
    RETURNING id
)
INSERT INTO owner_notification_files (file_id, notification_id, filename, size, uploaded_at)
SELECT @file_id::uuid, burst.id, @filename::text, @size::bigint, @uploaded_at::timestamptz FROM burst
ON CONFLICT (file_id) DO NOTHING;

-- name: CloseDueBursts :exec
-- Closes the bursts whose quiet time has passed.
UPDATE owner_notifications SET state = 'pending', updated_at = now()
WHERE kind = 'uploads' AND state = 'open' AND due_at <= now();

-- name: LockDueNotification :one
-- Locks one due notification no other instance holds, with what its e-mail needs: the
-- recipient is the one whose link was used (gateway migration 00019), else the first;
-- the owner's language (gateway migration 00037; '' when they chose none).
SELECT n.id, n.kind, n.package_id, n.attempts, p.title,
       coalesce(r.email, p.recipient_email)::text AS recipient_email, coalesce(r.name, p.recipient_name)::text AS recipient_name,
       u.email AS owner_email, u.name AS owner_name, coalesce(u.language, '')::text AS owner_language,
       p.notify_owner, n.filename, n.signature
FROM owner_notifications n
JOIN packages p ON p.id = n.package_id
JOIN users u ON u.id = p.owner_user_id
LEFT JOIN recipients r ON r.package_id = n.package_id AND n.recipient_email <> '' AND lower(r.email) = lower(n.recipient_email)
WHERE n.state = 'pending' AND n.due_at <= now()
ORDER BY n.due_at
LIMIT 1
FOR UPDATE OF n SKIP LOCKED;

-- name: NotificationFiles :many
SELECT filename, size FROM owner_notification_files WHERE notification_id = $1 ORDER BY uploaded_at, file_id;

-- name: RecordNotification :exec
-- Writes a notification attempt's outcome.
UPDATE owner_notifications
SET state      = @state::text,
    attempts   = attempts + @attempted::int,
    last_error = @last_error,
    message_id = CASE WHEN @message_id::text <> '' THEN @message_id::text ELSE message_id END,
    sent_at    = CASE WHEN @state::text = 'sent' THEN now() ELSE sent_at END,
    due_at     = now() + make_interval(secs => @retry_secs::float8),
    updated_at = now()
WHERE id = @id;

-- name: LockDueAccountNotice :one
-- Locks one due account notice no other instance holds, with its user's address
-- (gateway migration 00029) and language (00037; '' when they chose none): a security
-- e-mail about the user's own account.
SELECT n.id, n.event, n.detail, n.attempts, u.email AS user_email, u.name AS user_name,
       coalesce(u.language, '')::text AS user_language
FROM account_notices n
JOIN users u ON u.id = n.user_id
WHERE n.state = 'pending' AND n.due_at <= now()
ORDER BY n.due_at
LIMIT 1
FOR UPDATE OF n SKIP LOCKED;

-- name: RecordAccountNotice :exec
-- Writes an account notice attempt's outcome.
UPDATE account_notices
SET state      = @state::text,
    attempts   = attempts + @attempted::int,
    last_error = @last_error,
    message_id = CASE WHEN @message_id::text <> '' THEN @message_id::text ELSE message_id END,
    sent_at    = CASE WHEN @state::text = 'sent' THEN now() ELSE sent_at END,
    due_at     = now() + make_interval(secs => @retry_secs::float8),
    updated_at = now()
WHERE id = @id;

-- name: InsertAccountAudit :exec
-- Writes a system entry of the audit log about an account (no package).
INSERT INTO audit_log (actor, action, detail) VALUES ('system', @action, @detail);
