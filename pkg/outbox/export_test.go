package outbox

import "context"

// Cleanup exposes the relay's periodic deletion of published rows to the tests.
func (r *Relay) Cleanup(ctx context.Context) (int64, error) { return r.cleanup(ctx) }
