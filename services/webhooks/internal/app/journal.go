package app

import (
	"context"
	"errors"
)

// AttemptJournal holds attempt records durably on their way to the store, so that an
// attempt which leaves nothing for a later step to read is written to the database
// off the delivery path: with the records of every instance, in commits of their own,
// whatever the number of instances. Append returns once the record is durable (it
// outlives this process); the store has it a moment later.
type AttemptJournal interface {
	Append(ctx context.Context, rec AttemptRecord) error
}

// ErrNotJournaled is Append's error for a record the journal does not take (its body
// is too large for a journal message): it is committed on the delivery path instead.
var ErrNotJournaled = errors.New("attempt record not taken by the journal")

// journaled says whether an attempt's record may go through the journal: the first
// attempt of a delivery that has no row yet, which delivered it, on an unordered
// subscription. Nothing reads such a delivery's row on the way: no retry loads it, no
// package waits for it, no subscription is disabled by it. Every other record is
// committed before its job is acknowledged.
func journaled(rec AttemptRecord, rowless bool) bool {
	return rowless && rec.Status == StatusSucceeded && !rec.FinishOrder && rec.DisableReason == ""
}
