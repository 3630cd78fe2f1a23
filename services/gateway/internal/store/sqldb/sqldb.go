// Package sqldb is what the gateway's store packages share on PostgreSQL: the
// transaction of a change, which writes the change's effects (audit entries and outbox
// rows) beside it and wakes the outbox relay once it has committed; the PostgreSQL
// error codes the stores map to the app's errors; sqlc's queries over a batch; and the
// dedicated connections that LISTEN for notifications (listen.go). Each domain's store
// (policiesdb, auditdb, …) and the store package take one *DB, so every transaction of
// the gateway wakes the same relay and seals with the same key.
package sqldb

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/outbox"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
)

// PostgreSQL error codes the stores map to application errors.
const (
	UniqueViolation     = "23505"
	ForeignKeyViolation = "23503"
	// OnLegalHold is raised by the triggers that refuse to delete, expire or remove
	// the files of a package under a legal hold (migration 00033_audit_chain.sql).
	OnLegalHold = "SH409"
)

// DB is the gateway's pool with the outbox's wake-up and sealer.
type DB struct {
	// Pool is the pool every store runs on.
	Pool *pgxpool.Pool
	// wake is called after a transaction that wrote outbox rows has committed.
	wake func()
	// seal seals the payloads of ephemeral outbox messages; nil: they are stored as
	// they are.
	seal func([]byte) ([]byte, error)
}

// Option configures a DB.
type Option func(*DB)

// WithOutboxWake has the stores call wake (the outbox relay's Wake) after every
// transaction that wrote outbox rows has committed, so they are published at once
// instead of at the relay's next poll. Nothing in the transaction itself signals.
func WithOutboxWake(wake func()) Option {
	return func(d *DB) {
		if wake != nil {
			d.wake = wake
		}
	}
}

// WithSealer has the stores seal the payload of every ephemeral outbox message (a
// mail job, which carries a magic link) with seal before it is written, so that the
// outbox table holds no raw link; the relay opens it (outbox.Options.Open) as it
// publishes.
func WithSealer(seal func([]byte) ([]byte, error)) Option { return func(d *DB) { d.seal = seal } }

// NewDB returns the DB on pool.
func NewDB(pool *pgxpool.Pool, opts ...Option) *DB {
	d := &DB{Pool: pool, wake: func() {}}
	for _, o := range opts {
		o(d)
	}
	return d
}

// effectsTx is the transaction InTx hands to its function: WriteEffects notes on it
// that outbox rows were written.
type effectsTx struct {
	pgx.Tx
	wroteMessages bool
}

// InTx runs fn in a transaction (pgx.BeginFunc) and, once it has committed, wakes the
// outbox relay if WriteEffects wrote messages in it. A legal hold's refusal
// (OnLegalHold) is audit.ErrOnHold.
func (d *DB) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	var et *effectsTx
	err := pgx.BeginFunc(ctx, d.Pool, func(tx pgx.Tx) error {
		et = &effectsTx{Tx: tx}
		return fn(et)
	})
	if err == nil && et != nil && et.wroteMessages {
		d.wake()
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == OnLegalHold {
		return audit.ErrOnHold
	}
	return err
}

// WriteEffects writes audit entries, and events, mail jobs and webhook jobs as outbox
// rows, in tx: a transaction of InTx, which wakes the outbox relay after the commit.
func (d *DB) WriteEffects(ctx context.Context, tx pgx.Tx, fx app.Effects) error {
	b := &pgx.Batch{}
	if err := d.QueueEffects(ctx, b, fx); err != nil {
		return err
	}
	if b.Len() == 0 {
		return nil
	}
	if et, ok := tx.(*effectsTx); ok && HasMessages(fx) {
		et.wroteMessages = true
	}
	return tx.SendBatch(ctx, b).Close()
}

// WriteEffectsAlone writes effects that belong to no other change, as one batch (one
// implicit transaction, one round trip).
func (d *DB) WriteEffectsAlone(ctx context.Context, fx app.Effects) error {
	b := &pgx.Batch{}
	if err := d.QueueEffects(ctx, b, fx); err != nil || b.Len() == 0 {
		return err
	}
	return d.Committed(fx, d.Pool.SendBatch(ctx, b).Close())
}

// Committed wakes the outbox relay when err is nil and fx held outbox messages, and
// returns err: the tail of every batch of effects sent outside a transaction.
func (d *DB) Committed(fx app.Effects, err error) error {
	if err == nil && HasMessages(fx) {
		d.wake()
	}
	return err
}

// HasMessages reports whether fx holds outbox messages.
func HasMessages(fx app.Effects) bool {
	return len(fx.Events)+len(fx.Mail)+len(fx.WebhookJobs) > 0
}

// QueueEffects adds the audit entries and outbox messages of a change to b. The
// payloads of ephemeral messages (mail jobs, which carry magic links) are sealed
// with the DB's sealer, so that no raw link is readable in the outbox table; the
// relay opens them as it publishes.
func (d *DB) QueueEffects(ctx context.Context, b *pgx.Batch, fx app.Effects) error {
	q := New(Batched(b))
	for _, a := range fx.Audit {
		_ = writeAudit(ctx, q, a)
	}
	msgs := make([]outbox.Message, 0, len(fx.Events)+len(fx.Mail)+len(fx.WebhookJobs))
	for _, e := range fx.Events {
		m, err := events.EventMessage(e)
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	for _, j := range fx.Mail {
		m, err := events.MailMessage(j)
		if err != nil {
			return err
		}
		if m.Data, err = d.sealPayload(m); err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	for _, j := range fx.WebhookJobs {
		m, err := events.WebhookJobMessage(j.Job, j.MsgID)
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	return outbox.Queue(ctx, b, msgs...)
}

// sealPayload is m's payload as the outbox stores it: sealed when m is ephemeral and
// the DB has a sealer.
func (d *DB) sealPayload(m outbox.Message) ([]byte, error) {
	if !m.Ephemeral || d.seal == nil {
		return m.Data, nil
	}
	sealed, err := d.seal(m.Data)
	if err != nil {
		return nil, fmt.Errorf("seal outbox message %s: %w", m.ID, err)
	}
	return sealed, nil
}

// WriteAudit writes audit entries with db: a transaction's, to write them in the
// transaction of their change. An hourly entry is counted in its hour's row.
func WriteAudit(ctx context.Context, db DBTX, entries ...app.AuditEntry) error {
	q := New(db)
	for _, a := range entries {
		if err := writeAudit(ctx, q, a); err != nil {
			return err
		}
	}
	return nil
}

func writeAudit(ctx context.Context, q *Queries, a app.AuditEntry) error {
	arg := InsertAuditParams{
		Actor: a.Actor, ActorUserID: a.ActorUserID, Action: a.Action, PackageID: a.PackageID, FileID: a.FileID,
		Ip: a.IP, UserAgent: a.UserAgent, Detail: a.Detail, RecipientID: a.RecipientID,
	}
	if a.Hourly {
		return q.CountAuditHourly(ctx, CountAuditHourlyParams(arg))
	}
	return q.InsertAudit(ctx, arg)
}

// NotFound is app.NotFound(what) when err is pgx.ErrNoRows, else err.
func NotFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return app.NotFound(what)
	}
	return err
}

// IsCode reports whether err is a PostgreSQL error with that code.
func IsCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}
