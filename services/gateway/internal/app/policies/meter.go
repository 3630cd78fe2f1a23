package policies

import (
	"context"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Meter is the reservation of an upload whose size is known only as its bytes arrive
// (multipart): it holds them in steps of at least step bytes ahead of the bytes read,
// so parallel uploads pass the quota by at most nothing. Once less than half a step is
// left ahead, the next step is reserved in the background, so that the upload's
// stream does not stop for each reservation's commit (a commit waits for the disk,
// which the object store's writes keep busy); the bytes wait only when they overtake
// what is held. Near the quota, where a step no longer fits, each reservation is what
// the bytes need, taken before they go on.
//
// One goroutine at a time calls Take; Settle (or Release) is called once the upload's
// bytes are all read, before its file is recorded.
type Meter struct {
	s    *Policies
	r    *Reservation
	read int64
	step int64
	pkg  int64
	// held is what r holds as the reading side last saw it: while a reservation runs
	// in the background, r is that reservation's.
	held int64
	// tight: the last step did not fit, so none is reserved ahead.
	tight bool
	// ahead answers the reservation under way in the background (nil: none).
	ahead chan error
}

// StartMeter starts the reservation of an upload into a package holding packageSize
// bytes, stored under objectKey (whose reservation is its hold's home); nil when
// nothing is to be held or checked (no quota, cap or size limit applies).
func (s *Policies) StartMeter(ctx context.Context, userID, packageSize int64, objectKey string, step int64) (*Meter, error) {
	r, err := s.prepare(ctx, userID, 0, packageSize, Hold{ObjectKey: objectKey})
	if err != nil {
		return nil, err
	}
	if !r.held && r.policy.MaxFileSize == nil && r.policy.MaxPackageSize == nil {
		return nil, nil
	}
	return &Meter{s: s, r: r, step: max(step, 1), pkg: packageSize}, nil
}

// Take accounts for n more bytes of the upload before they are stored: a 413 when
// they pass a size limit or do not fit the quota.
func (m *Meter) Take(ctx context.Context, n int64) error {
	m.read += n
	if err := CheckFileSize(m.r.policy, m.read, m.pkg); err != nil {
		return err
	}
	if !m.r.held {
		return nil
	}
	if m.read > m.held {
		m.Settle() // the step under way may cover them
	}
	if m.read > m.held {
		if err := m.takeNow(ctx); err != nil {
			return err
		}
	}
	if m.ahead == nil && !m.tight && m.held > 0 && m.held-m.read < m.step/2 {
		m.reserveAhead(ctx)
	}
	return nil
}

// takeNow holds what the bytes read need: a step when it fits, else exactly that.
func (m *Meter) takeNow(ctx context.Context) error {
	// The first bytes record the hold; later ones grow it.
	grow := m.r.active
	need := m.read - m.r.Bytes
	defer func() { m.held = m.r.Bytes }()
	if need >= m.step {
		return m.s.take(ctx, m.r, need, grow, true)
	}
	err := m.s.take(ctx, m.r, m.step, grow, false)
	m.tight = err != nil && app.KindOf(err) == app.KindTooLarge
	if m.tight {
		// The step does not fit; what the bytes need may.
		err = m.s.take(ctx, m.r, need, grow, true)
	}
	return err
}

// reserveAhead grows the hold by a step in the background.
func (m *Meter) reserveAhead(ctx context.Context) {
	done := make(chan error, 1)
	m.ahead = done
	go func() { done <- m.s.take(ctx, m.r, m.step, true, false) }()
}

// Settle waits for the reservation under way in the background, if any. Its failure
// is no error of the upload's: bytes that need the step take what they need
// themselves, and answer the refusal.
func (m *Meter) Settle() {
	if m == nil || m.ahead == nil {
		return
	}
	err := <-m.ahead
	m.ahead = nil
	if err != nil && app.KindOf(err) == app.KindTooLarge {
		m.tight = true
	}
	m.held = m.r.Bytes
}

// Release gives the meter's bytes back (the upload failed).
func (m *Meter) Release(ctx context.Context) {
	if m != nil {
		m.Settle()
		_ = m.s.Release(ctx, m.r)
	}
}
