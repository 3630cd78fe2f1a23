package packages

import (
	"context"
	"sync"
	"time"
)

// ObjectReservationRenewal is how often an upload in progress renews its object key's
// reservation; SHIPFILE_ORPHAN_GRACE must be longer (the expiry service checks that it
// is at least twice as long).
const ObjectReservationRenewal = 5 * time.Minute

// HoldObjectKey reserves key before its bytes are stored (so that an object left by a
// crash or a failed insert is found and removed after SHIPFILE_ORPHAN_GRACE) and renews
// the reservation every ObjectReservationRenewal until release is called. Call release
// once the bytes are stored (or failed to be); the store's AddFile ends the reservation
// in the transaction that commits the file row. Every upload path (multipart, tus)
// goes through it.
func (s *Packages) HoldObjectKey(ctx context.Context, key string) (release func(), err error) {
	if err := s.store.ReserveObjectKey(ctx, key); err != nil {
		return nil, err
	}
	// A failed renewal is tried again at the next tick; the commit then tells whether the
	// reservation survived.
	return renewEvery(ctx, s.reservationRenewal, func(ctx context.Context) {
		_ = s.store.ReserveObjectKey(ctx, key)
	}), nil
}

// renewEvery calls renew every interval until the returned stop is called, which
// cancels a renewal under way and waits for it. The renewals' context outlives ctx's
// cancellation: a hold lasts until stop, not until the request that took it ends.
func renewEvery(ctx context.Context, interval time.Duration, renew func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				renew(ctx)
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
