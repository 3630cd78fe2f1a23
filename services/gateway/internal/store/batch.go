package store

import (
	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// batched is sqlc's Queries over a batch (sqldb.Batched): each :exec statement called
// on it is queued on b and runs when the batch is sent.
func batched(b *pgx.Batch) *Queries { return New(sqldb.Batched(b)) }
