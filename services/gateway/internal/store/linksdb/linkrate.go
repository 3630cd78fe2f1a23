package linksdb

import (
	"context"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
)

var _ links.RateStore = (*Store)(nil)

// TakeRate takes one request from client's GCRA bucket: interval is the time one
// request earns back, tolerance how far ahead of now the bucket may run (the burst
// times interval). When the bucket is empty it returns false and the wait.
func (s *Store) TakeRate(ctx context.Context, client string, interval, tolerance time.Duration) (bool, time.Duration, error) {
	r, err := s.q.TakeLinkRate(ctx, TakeLinkRateParams{
		Client: client, IntervalUs: interval.Microseconds(), ToleranceUs: tolerance.Microseconds(),
	})
	if err != nil {
		return false, 0, err
	}
	return r.Taken, time.Duration(r.WaitSecs * float64(time.Second)), nil
}

// SweepRates forgets the buckets that have been full again for a while.
func (s *Store) SweepRates(ctx context.Context, idle time.Duration) error {
	return s.q.SweepLinkRates(ctx, idle.Microseconds())
}
