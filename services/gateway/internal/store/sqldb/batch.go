package sqldb

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Batched is a DBTX that queues each statement sqlc's :exec queries send on b with the
// arguments sqlc lays out; they run when the batch is sent (their error comes with the
// batch's Close). It keeps one round trip for a change and its effects without
// positional argument lists written by hand. A query that reads rows fails
// (ErrBatchRead): a queued statement has no answer yet.
func Batched(b *pgx.Batch) DBTX { return batchDB{b} }

// ErrBatchRead is returned by a query that reads rows, which a batch cannot answer
// when queued.
var ErrBatchRead = errors.New("sqldb: a batched statement cannot read rows")

type batchDB struct{ b *pgx.Batch }

func (d batchDB) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	d.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (batchDB) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, ErrBatchRead }

func (batchDB) QueryRow(context.Context, string, ...any) pgx.Row { return errRow{} }

type errRow struct{}

func (errRow) Scan(...any) error { return ErrBatchRead }
