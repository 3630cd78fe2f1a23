package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// RecordJournal writes attempt records taken from the journal (app.AttemptJournal):
// each is the first attempt of a delivery that had no row, which the same statement as
// RecordAttempts writes with it. A record whose delivery has a row already was written
// before (a journal message handed out again after its writer stopped between the
// commit and the acknowledgement) and is skipped, so no attempt is logged twice.
func (p *Postgres) RecordJournal(ctx context.Context, recs []app.AttemptRecord) error {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.DeliveryID
	}
	stored, err := p.q.StoredDeliveries(ctx, ids)
	if err != nil {
		return fmt.Errorf("store: %d journaled deliveries: %w", len(ids), err)
	}
	if len(stored) > 0 {
		skip := make(map[string]bool, len(stored))
		for _, id := range stored {
			skip[id] = true
		}
		recs = slices.DeleteFunc(slices.Clone(recs), func(r app.AttemptRecord) bool { return skip[r.DeliveryID] })
	}
	if len(recs) == 0 {
		return nil
	}
	_, err = p.RecordAttempts(ctx, recs)
	return err
}
