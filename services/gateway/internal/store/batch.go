package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// batched is sqlc's Queries over a batch: each :exec statement called on it is queued
// on b with the arguments sqlc lays out, and runs when the batch is sent (its error
// comes with the batch's Close). It keeps one round trip for a change and its effects
// without positional argument lists written by hand.
func batched(b *pgx.Batch) *Queries { return New(batchDB{b}) }

// errBatchRead is returned by a query that reads rows, which a batch cannot answer
// when queued.
var errBatchRead = errors.New("store: a batched statement cannot read rows")

type batchDB struct{ b *pgx.Batch }

func (d batchDB) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	d.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (batchDB) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, errBatchRead }

func (batchDB) QueryRow(context.Context, string, ...any) pgx.Row { return errRow{} }

type errRow struct{}

func (errRow) Scan(...any) error { return errBatchRead }
