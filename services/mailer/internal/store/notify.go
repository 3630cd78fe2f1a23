package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/mailer/internal/app"
	"github.com/shipfile/shipfile/services/mailer/internal/store/db"
)

var _ app.NotifyStore = (*Postgres)(nil)

// RecordDownload notes an outbound package's download (its first makes the
// notification).
func (p *Postgres) RecordDownload(ctx context.Context, packageID, recipientEmail string) error {
	if err := p.q.RecordDownload(ctx, db.RecordDownloadParams{PackageID: packageID, RecipientEmail: recipientEmail}); err != nil {
		return fmt.Errorf("store: record download of %s: %w", packageID, err)
	}
	return nil
}

// RecordUpload adds a recipient's upload to its package's open burst.
func (p *Postgres) RecordUpload(ctx context.Context, u app.Upload, quiet time.Duration) error {
	err := p.q.RecordUpload(ctx, db.RecordUploadParams{
		PackageID: u.PackageID, FileID: u.FileID, Filename: u.Filename, Size: u.Size,
		UploadedAt: u.At, QuietSecs: quiet.Seconds(), RecipientEmail: u.RecipientEmail,
	})
	if err != nil {
		return fmt.Errorf("store: record upload %s: %w", u.FileID, err)
	}
	return nil
}

// CloseDueBursts closes the bursts that have been quiet long enough.
func (p *Postgres) CloseDueBursts(ctx context.Context) error {
	if err := p.q.CloseDueBursts(ctx); err != nil {
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
	q := p.q.WithTx(tx)
	row, err := q.LockDueNotification(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: lock due notification: %w", err)
	}
	n := app.Notification{
		ID: row.ID, Kind: row.Kind, PackageID: row.PackageID, Attempts: int(row.Attempts), Title: row.Title,
		RecipientEmail: row.RecipientEmail, RecipientName: row.RecipientName,
		OwnerEmail: row.OwnerEmail, OwnerName: row.OwnerName, OwnerLanguage: row.OwnerLanguage, NotifyOwner: row.NotifyOwner,
		Filename: row.Filename, Signature: row.Signature,
	}
	files, err := q.NotificationFiles(ctx, n.ID)
	if err != nil {
		return false, fmt.Errorf("store: files of notification %d: %w", n.ID, err)
	}
	for _, f := range files {
		n.Files = append(n.Files, app.NotifiedFile{Name: f.Filename, Size: f.Size})
	}

	out := fn(n)
	if out.State == "" {
		return false, nil // stopping: the rollback leaves it due
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	err = q.RecordNotification(wctx, db.RecordNotificationParams{
		ID: n.ID, State: out.State, Attempted: attempted(out), LastError: out.Error, MessageID: out.MessageID,
		RetrySecs: out.RetryIn.Seconds(),
	})
	if err != nil {
		return false, fmt.Errorf("store: record notification %d: %w", n.ID, err)
	}
	if out.AuditAction != "" {
		err := q.InsertAudit(wctx, db.InsertAuditParams{Action: out.AuditAction, PackageID: n.PackageID, Detail: out.AuditDetail})
		if err != nil {
			return false, fmt.Errorf("store: audit notification %d: %w", n.ID, err)
		}
	}
	if err := tx.Commit(wctx); err != nil {
		return false, fmt.Errorf("store: commit notification %d: %w", n.ID, err)
	}
	return true, nil
}

// SendDueAccount locks one due account notice (skipping those other instances hold),
// calls fn with it while holding the lock and writes fn's outcome and audit entry in
// the same transaction.
func (p *Postgres) SendDueAccount(ctx context.Context, fn func(app.Notification) app.Outcome) (bool, error) {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("store: begin: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	q := p.q.WithTx(tx)
	row, err := q.LockDueAccountNotice(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: lock due account notice: %w", err)
	}
	out := fn(app.Notification{
		ID: row.ID, Kind: app.NotifyAccount, Attempts: int(row.Attempts), OwnerEmail: row.UserEmail, OwnerName: row.UserName,
		OwnerLanguage: row.UserLanguage, AccountEvent: row.Event, AccountDetail: row.Detail,
	})
	if out.State == "" {
		return false, nil // stopping: the rollback leaves it due
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	err = q.RecordAccountNotice(wctx, db.RecordAccountNoticeParams{
		ID: row.ID, State: out.State, Attempted: attempted(out), LastError: out.Error, MessageID: out.MessageID,
		RetrySecs: out.RetryIn.Seconds(),
	})
	if err != nil {
		return false, fmt.Errorf("store: record account notice %d: %w", row.ID, err)
	}
	if out.AuditAction != "" {
		if err := q.InsertAccountAudit(wctx, db.InsertAccountAuditParams{Action: out.AuditAction, Detail: out.AuditDetail}); err != nil {
			return false, fmt.Errorf("store: audit account notice %d: %w", row.ID, err)
		}
	}
	if err := tx.Commit(wctx); err != nil {
		return false, fmt.Errorf("store: commit account notice %d: %w", row.ID, err)
	}
	return true, nil
}
