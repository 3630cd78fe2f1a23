package store

// CreateRounds is the number of round trips the store's package creations have sent.
func (s *Postgres) CreateRounds() int64 { return s.creates.rounds.Load() }

// QueuedCreates is the number of package creations waiting for a round.
func (s *Postgres) QueuedCreates() int {
	s.creates.mu.Lock()
	defer s.creates.mu.Unlock()
	return len(s.creates.queue)
}
