// Package store keeps the mailer's state in PostgreSQL (pgx/v5): one mail_deliveries
// row per mail job, and the audit entries of sent and failed e-mails. The gateway owns
// the schema.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/services/mailer/internal/app"
	"github.com/shipfile/shipfile/services/mailer/internal/store/db"
)

// pgLockNotAvailable is SQLSTATE 55P03, what FOR UPDATE NOWAIT answers when the row is
// locked.
const pgLockNotAvailable = "55P03"

// writeTimeout bounds writing an attempt's outcome, which happens even when the
// handling context was cancelled while the e-mail was being sent.
const writeTimeout = 10 * time.Second

// Postgres is the mailer's store.
type Postgres struct {
	pool *pgxpool.Pool
	q    *db.Queries // the statements of queries.sql, on the pool
}

var _ app.Store = (*Postgres)(nil)

// New returns a store on pool. Each attempt holds one connection while the e-mail is
// sent: the mailer's main sizes the pool for its workers (service.Connections.MinConns).
func New(pool *pgxpool.Pool) *Postgres { return &Postgres{pool: pool, q: db.New(pool)} }

// Attempt records job at first sight, locks its record (app.ErrBusy when another
// instance holds the lock), reads its package's state, calls fn with both and writes fn's outcome and audit entry in
// the same transaction. The lock is held while fn sends the e-mail.
func (p *Postgres) Attempt(ctx context.Context, job app.Job, fn func(app.Delivery) app.Outcome) error {
	err := p.q.EnsureDelivery(ctx, db.EnsureDeliveryParams{
		JobID: job.ID, PackageID: job.PackageID, Kind: job.Kind, RecipientEmail: job.RecipientEmail,
	})
	if err != nil {
		return fmt.Errorf("store: record job %s: %w", job.ID, err)
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	defer func() {
		// A no-op after Commit; releases the lock otherwise, even when ctx is done.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()

	q := p.q.WithTx(tx)
	locked, err := q.LockDelivery(ctx, job.ID)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == pgLockNotAvailable {
		return app.ErrBusy
	}
	if err != nil {
		return fmt.Errorf("store: lock job %s: %w", job.ID, err)
	}
	d := app.Delivery{State: locked.State, Attempts: int(locked.Attempts)}
	d.PackageState, err = q.PackageState(ctx, db.PackageStateParams{ID: job.PackageID, Now: time.Now()})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("store: package of job %s: %w", job.ID, err)
	}

	out := fn(d)
	if out.State == "" {
		return nil // nothing to write; the rollback releases the lock
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	err = q.RecordAttempt(wctx, db.RecordAttemptParams{
		JobID: job.ID, State: out.State, Attempted: attempted(out), LastError: out.Error, MessageID: out.MessageID,
	})
	if err != nil {
		return fmt.Errorf("store: record attempt of %s: %w", job.ID, err)
	}
	if out.AuditAction != "" {
		err := q.InsertAudit(wctx, db.InsertAuditParams{Action: out.AuditAction, PackageID: job.PackageID, Detail: out.AuditDetail})
		if err != nil {
			return fmt.Errorf("store: audit %s of %s: %w", out.AuditAction, job.ID, err)
		}
	}
	if err := tx.Commit(wctx); err != nil {
		return fmt.Errorf("store: commit attempt of %s: %w", job.ID, err)
	}
	return nil
}

// attempted is what an outcome adds to the attempts: 1 when an attempt was made.
func attempted(out app.Outcome) int32 {
	if out.Attempted {
		return 1
	}
	return 0
}
