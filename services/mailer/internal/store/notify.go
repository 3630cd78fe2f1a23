package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/mailer/internal/app"
)

var _ app.NotifyStore = (*Postgres)(nil)

// The owner notifications' SQL (table owner_notifications, gateway migration 00012).
const (
	// qRecordDownload makes an outbound package's one 'downloaded' notification, due at
	// once, while its owner wants notifications; a later download adds nothing.
	qRecordDownload = `
INSERT INTO owner_notifications (package_id, kind, state, due_at)
SELECT id, 'downloaded', 'pending', now() FROM packages
WHERE id = $1 AND direction = 'outbound' AND notify_owner
ON CONFLICT (package_id) WHERE kind = 'downloaded' DO NOTHING`

	// qRecordUpload adds a recipient's upload to the package's open burst, opening one if
	// none is, and moves its due time to quiet from now; a file already recorded (a
	// redelivered event) changes nothing. The upsert takes the burst's row lock, so a
	// mailer closing the burst meanwhile either sees the new due time or the upload
	// opens a new burst.
	qRecordUpload = `
WITH pkg AS (
    SELECT id FROM packages
    WHERE id = @package_id AND direction = 'inbound' AND notify_owner
      AND NOT EXISTS (SELECT 1 FROM owner_notification_files WHERE file_id = @file_id)
), burst AS (
    INSERT INTO owner_notifications (package_id, kind, state, due_at)
    SELECT id, 'uploads', 'open', now() + make_interval(secs => @quiet_secs::float8) FROM pkg
    ON CONFLICT (package_id) WHERE kind = 'uploads' AND state = 'open'
    DO UPDATE SET due_at = greatest(owner_notifications.due_at, excluded.due_at), updated_at = now()
    RETURNING id
)
INSERT INTO owner_notification_files (file_id, notification_id, filename, size, uploaded_at)
SELECT @file_id, id, @filename, @size, @uploaded_at FROM burst
ON CONFLICT (file_id) DO NOTHING`

	// qCloseDueBursts closes the bursts whose quiet time has passed.
	qCloseDueBursts = `
UPDATE owner_notifications SET state = 'pending', updated_at = now()
WHERE kind = 'uploads' AND state = 'open' AND due_at <= now()`

	// qLockDueNotification locks one due notification no other instance holds, with
	// what its e-mail needs.
	qLockDueNotification = `
SELECT n.id, n.kind, n.package_id::text, n.attempts, p.title, p.recipient_email, p.recipient_name,
       u.email, u.name, p.notify_owner
FROM owner_notifications n
JOIN packages p ON p.id = n.package_id
JOIN users u ON u.id = p.owner_user_id
WHERE n.state = 'pending' AND n.due_at <= now()
ORDER BY n.due_at
LIMIT 1
FOR UPDATE OF n SKIP LOCKED`

	qNotificationFiles = `
SELECT filename, size FROM owner_notification_files WHERE notification_id = $1 ORDER BY uploaded_at, file_id`

	// qRecordNotification writes an attempt's outcome.
	qRecordNotification = `
UPDATE owner_notifications
SET state      = @state,
    attempts   = attempts + @attempted,
    last_error = @last_error,
    message_id = CASE WHEN @message_id::text <> '' THEN @message_id ELSE message_id END,
    sent_at    = CASE WHEN @state = 'sent' THEN now() ELSE sent_at END,
    due_at     = now() + make_interval(secs => @retry_secs::float8),
    updated_at = now()
WHERE id = @id`
)

// RecordDownload notes an outbound package's download (its first makes the
// notification).
func (p *Postgres) RecordDownload(ctx context.Context, packageID string) error {
	if _, err := p.pool.Exec(ctx, qRecordDownload, packageID); err != nil {
		return fmt.Errorf("store: record download of %s: %w", packageID, err)
	}
	return nil
}

// RecordUpload adds a recipient's upload to its package's open burst.
func (p *Postgres) RecordUpload(ctx context.Context, u app.Upload, quiet time.Duration) error {
	_, err := p.pool.Exec(ctx, qRecordUpload, pgx.NamedArgs{
		"package_id": u.PackageID, "file_id": u.FileID, "filename": u.Filename, "size": u.Size,
		"uploaded_at": u.At, "quiet_secs": quiet.Seconds(),
	})
	if err != nil {
		return fmt.Errorf("store: record upload %s: %w", u.FileID, err)
	}
	return nil
}

// CloseDueBursts closes the bursts that have been quiet long enough.
func (p *Postgres) CloseDueBursts(ctx context.Context) error {
	if _, err := p.pool.Exec(ctx, qCloseDueBursts); err != nil {
		return fmt.Errorf("store: close due bursts: %w", err)
	}
	return nil
}

// SendDue locks one due notification (skipping those other instances hold), calls fn
// with it while holding the lock and writes fn's outcome and audit entry in the same
// transaction. A mailer killed while fn sends leaves the row due for another.
func (p *Postgres) SendDue(ctx context.Context, fn func(app.Notification) app.Outcome) (bool, error) {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("store: begin: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	var n app.Notification
	err = tx.QueryRow(ctx, qLockDueNotification).Scan(&n.ID, &n.Kind, &n.PackageID, &n.Attempts, &n.Title,
		&n.RecipientEmail, &n.RecipientName, &n.OwnerEmail, &n.OwnerName, &n.NotifyOwner)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: lock due notification: %w", err)
	}
	rows, err := tx.Query(ctx, qNotificationFiles, n.ID)
	if err != nil {
		return false, fmt.Errorf("store: files of notification %d: %w", n.ID, err)
	}
	n.Files, err = pgx.CollectRows(rows, pgx.RowToStructByPos[app.NotifiedFile])
	if err != nil {
		return false, fmt.Errorf("store: files of notification %d: %w", n.ID, err)
	}

	out := fn(n)
	if out.State == "" {
		return false, nil // stopping: the rollback leaves it due
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	attempted := 0
	if out.Attempted {
		attempted = 1
	}
	if _, err := tx.Exec(wctx, qRecordNotification, pgx.NamedArgs{
		"id": n.ID, "state": out.State, "attempted": attempted, "last_error": out.Error, "message_id": out.MessageID,
		"retry_secs": out.RetryIn.Seconds(),
	}); err != nil {
		return false, fmt.Errorf("store: record notification %d: %w", n.ID, err)
	}
	if out.AuditAction != "" {
		if _, err := tx.Exec(wctx, qInsertAudit, out.AuditAction, n.PackageID, out.AuditDetail); err != nil {
			return false, fmt.Errorf("store: audit notification %d: %w", n.ID, err)
		}
	}
	if err := tx.Commit(wctx); err != nil {
		return false, fmt.Errorf("store: commit notification %d: %w", n.ID, err)
	}
	return true, nil
}
