package store

import "github.com/prometheus/client_golang/prometheus/testutil"

// CreateRounds is the number of round trips the store's package creations have sent.
func (s *Postgres) CreateRounds() int64 { return int64(testutil.ToFloat64(s.creates.rounds)) }

// QueuedCreates is the number of package creations waiting for a round.
func (s *Postgres) QueuedCreates() int { return s.creates.c.Queued() }
