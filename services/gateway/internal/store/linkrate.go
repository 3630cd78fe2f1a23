package store

import (
	"context"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

var _ app.RateStore = (*Postgres)(nil)

// takeLinkRate is one GCRA step in one statement: a client's theoretical arrival
// time (tat) moves on by one emission interval ($2) from max(tat, now) when that
// stays within the burst tolerance ($3) of now; otherwise the row is left alone and
// the statement reports how long until it would fit. Hand-written (sqlc cannot be
// built on this machine; it belongs in queries.sql at the next make generate).
const takeLinkRate = `
WITH cur AS (
    SELECT greatest(tat, clock_timestamp()) AS base FROM link_rate WHERE client = $1
), up AS (
    INSERT INTO link_rate AS r (client, tat) VALUES ($1, clock_timestamp() + ($2::bigint * interval '1 microsecond'))
    ON CONFLICT (client) DO UPDATE
        SET tat = greatest(r.tat, clock_timestamp()) + ($2::bigint * interval '1 microsecond')
        WHERE greatest(r.tat, clock_timestamp()) + ($2::bigint * interval '1 microsecond') - clock_timestamp() <= ($3::bigint * interval '1 microsecond')
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM up),
       coalesce((SELECT extract(epoch FROM base + ($2::bigint * interval '1 microsecond') - ($3::bigint * interval '1 microsecond') - clock_timestamp()) FROM cur), 0)::float8`

// TakeRate takes one request from client's GCRA bucket: interval is the time one
// request earns back, tolerance how far ahead of now the bucket may run (the burst
// times interval). When the bucket is empty it returns false and the wait.
func (s *Postgres) TakeRate(ctx context.Context, client string, interval, tolerance time.Duration) (bool, time.Duration, error) {
	var ok bool
	var wait float64
	if err := s.pool.QueryRow(ctx, takeLinkRate, client, interval.Microseconds(), tolerance.Microseconds()).Scan(&ok, &wait); err != nil {
		return false, 0, err
	}
	return ok, time.Duration(wait * float64(time.Second)), nil
}

// SweepRates forgets the buckets that have been full again for a while.
func (s *Postgres) SweepRates(ctx context.Context, idle time.Duration) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM link_rate WHERE tat < clock_timestamp() - ($1::bigint * interval '1 microsecond')`, idle.Microseconds())
	return err
}
