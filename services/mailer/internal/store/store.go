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
}

var _ app.Store = (*Postgres)(nil)

// New returns a store on pool. Each attempt holds one connection while the e-mail is
// sent (see Open).
func New(pool *pgxpool.Pool) *Postgres { return &Postgres{pool: pool} }

// Open creates a pool on url with at least minConns connections (one per worker, which
// holds it while its e-mail is sent, plus room for the readiness check) and checks that
// the database answers.
func Open(ctx context.Context, url string, minConns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database: parse url: %w", err)
	}
	if cfg.MaxConns < int32(minConns) {
		cfg.MaxConns = int32(minConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database: ping: %w", err)
	}
	return pool, nil
}

// Attempt records job at first sight, locks its record (app.ErrBusy when another
// instance holds the lock), reads its package's state, calls fn with both and writes fn's outcome and audit entry in
// the same transaction. The lock is held while fn sends the e-mail.
func (p *Postgres) Attempt(ctx context.Context, job app.Job, fn func(app.Delivery) app.Outcome) error {
	if _, err := p.pool.Exec(ctx, qEnsureDelivery, job.ID, job.PackageID, job.Kind, job.RecipientEmail); err != nil {
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

	var d app.Delivery
	err = tx.QueryRow(ctx, qLockDelivery, job.ID).Scan(&d.State, &d.Attempts)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == pgLockNotAvailable {
		return app.ErrBusy
	}
	if err != nil {
		return fmt.Errorf("store: lock job %s: %w", job.ID, err)
	}
	err = tx.QueryRow(ctx, qPackageState, job.PackageID, time.Now()).Scan(&d.PackageState)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("store: package of job %s: %w", job.ID, err)
	}

	out := fn(d)
	if out.State == "" {
		return nil // nothing to write; the rollback releases the lock
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	attempted := 0
	if out.Attempted {
		attempted = 1
	}
	if _, err := tx.Exec(wctx, qRecordAttempt, pgx.NamedArgs{
		"job_id": job.ID, "state": out.State, "attempted": attempted, "last_error": out.Error, "message_id": out.MessageID,
	}); err != nil {
		return fmt.Errorf("store: record attempt of %s: %w", job.ID, err)
	}
	if out.AuditAction != "" {
		if _, err := tx.Exec(wctx, qInsertAudit, out.AuditAction, job.PackageID, out.AuditDetail); err != nil {
			return fmt.Errorf("store: audit %s of %s: %w", out.AuditAction, job.ID, err)
		}
	}
	if err := tx.Commit(wctx); err != nil {
		return fmt.Errorf("store: commit attempt of %s: %w", job.ID, err)
	}
	return nil
}
