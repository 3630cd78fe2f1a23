package packages

import (
	"context"
	"errors"
	"fmt"
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

// discardObject removes the object a failed upload stored under key. When the store
// cannot remove it now (it is down), the key is queued for deletion instead, so the
// expiry service removes the object at its first pass once the store answers again,
// rather than the orphan sweep after SHIPFILE_ORPHAN_GRACE. The key's reservation
// stays: an object that lands later still falls to the orphan sweep.
func (s *Packages) discardObject(ctx context.Context, key string) error {
	ctx = context.WithoutCancel(ctx)
	rmErr := s.objects.Remove(ctx, key)
	if rmErr == nil {
		return nil
	}
	if err := s.store.QueueObjectDeletion(ctx, key); err != nil {
		return errors.Join(fmt.Errorf("remove object after failed upload: %w", rmErr), fmt.Errorf("queue its deletion: %w", err))
	}
	return nil
}

// storeFailed queues key for deletion after the store failed an upload's write: the
// store's own clean-up may have failed with it, and a write whose answer was lost (a
// PUT or a multipart completion the store carried out as it went down) leaves an
// object the upload does not know of. A key queued with no object behind it costs the
// expiry service one removal; a failure to queue leaves the key to the orphan sweep.
func (s *Packages) storeFailed(ctx context.Context, key string) {
	_ = s.store.QueueObjectDeletion(context.WithoutCancel(ctx), key)
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
