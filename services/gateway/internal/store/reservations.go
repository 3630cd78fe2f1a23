package store

import (
	"context"
	"fmt"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// errReservationGone is the answer to a commit whose reservation the orphan sweep took:
// the upload ran past SHIPFILE_ORPHAN_GRACE without renewing it, and its object is
// (being) removed.
var errReservationGone = app.Conflict("the upload took too long to be committed and its stored bytes were removed; send the file again")

// ReserveObjectKey records that key is about to be written, before any byte of it is
// stored; called again, it renews the record. A key whose record outlives
// SHIPFILE_ORPHAN_GRACE without a file row is an orphan, which the expiry service
// removes. CommitObjectKey ends the reservation.
func (s *Postgres) ReserveObjectKey(ctx context.Context, key string) error {
	if err := s.q.ReserveObjectKey(ctx, key); err != nil {
		return fmt.Errorf("reserve object key: %w", err)
	}
	return nil
}

// QueueObjectDeletion queues key for deletion: the expiry service removes its object
// (none is fine) at its next pass, then forgets the key.
func (s *Postgres) QueueObjectDeletion(ctx context.Context, key string) error {
	if err := s.q.QueueObjectDeletion(ctx, []string{key}); err != nil {
		return fmt.Errorf("queue object deletion: %w", err)
	}
	return nil
}

// CommitObjectKey ends key's reservation; q must be on the transaction that writes the
// key's file row (Queries.WithTx). When the reservation is gone (the orphan sweep
// removed the object), it fails with a conflict and the transaction must roll back.
// The sweep holds the reservation's row lock while it removes the object, so this
// waits for it.
func (q *Queries) CommitObjectKey(ctx context.Context, key string) error {
	n, err := q.ReleaseObjectKey(ctx, key)
	if err != nil {
		return fmt.Errorf("commit object key: %w", err)
	}
	if n == 0 {
		return errReservationGone
	}
	return nil
}
