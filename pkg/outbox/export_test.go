package outbox

import "context"

// Cleanup exposes the relay's periodic deletion of published rows to the tests.
func (r *Relay) Cleanup(ctx context.Context) (int64, error) { return r.cleanup(ctx) }

// Passes is how many publishing passes the relay has run to their end.
func (r *Relay) Passes() int64 { return r.passes.Load() }
