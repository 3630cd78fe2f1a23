package transfers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// ErrUploadLocked is the answer to a request for an upload that another request
// holds and did not let go within TusConfig.LockWait: a holder that cannot be reached
// (its gateway was killed) until its lease lapses.
var ErrUploadLocked = &app.Error{Kind: app.KindLocked, Detail: "another request holds this upload and did not let go (its gateway may be gone); retry once its lease lapses"}

// askAgain is how often a waiting request repeats its ask to let go (a new holder
// may have taken the lease meanwhile, or the ask's notification was missed), and
// maxPoll the longest pause between two looks at the lease.
const (
	askAgain = time.Second
	maxPoll  = 100 * time.Millisecond
)

// acquire takes the upload's lease for owner (only an upload who owns, when who is
// set). When a running request holds it, that request is asked to let go, on
// whichever gateway it runs, and acquire waits for it up to LockWait: a PATCH whose
// client went away, or a second client's, stores what it has and gives the lease
// back within that time. ErrUploadLocked is left for a holder that cannot be reached
// (a killed gateway's, until its lease lapses). It returns the row and when the lock
// statement was sent (the earliest the lease may have started).
func (r *Resumable) acquire(ctx context.Context, id, owner uuid.UUID, who *TusOwner) (TusUpload, time.Time, error) {
	deadline := time.Now().Add(r.cfg.LockWait)
	var askedAt time.Time
	pause := 5 * time.Millisecond
	for {
		start := time.Now()
		u, err := r.store.LockUpload(ctx, id, owner, r.cfg.Lease, who)
		if !errors.Is(err, ErrUploadLocked) {
			return u, start, err
		}
		if time.Since(askedAt) >= askAgain {
			if err := r.askRelease(ctx, id); err != nil {
				return TusUpload{}, start, err
			}
			askedAt = time.Now()
		}
		if err := sleepUntil(ctx, deadline, pause); err != nil {
			return TusUpload{}, start, err
		}
		pause = min(2*pause, maxPoll)
	}
}

// awaitRelease asks the request that holds u to let go and waits up to LockWait for
// it, then returns the upload as it stands (still held when its holder cannot be
// reached).
func (r *Resumable) awaitRelease(ctx context.Context, u TusUpload) (TusUpload, error) {
	deadline := time.Now().Add(r.cfg.LockWait)
	var askedAt time.Time
	pause := 5 * time.Millisecond
	for u.Held {
		if time.Since(askedAt) >= askAgain {
			if err := r.askRelease(ctx, u.ID); err != nil {
				return TusUpload{}, err
			}
			askedAt = time.Now()
		}
		if err := sleepUntil(ctx, deadline, pause); errors.Is(err, ErrUploadLocked) {
			return u, nil
		} else if err != nil {
			return TusUpload{}, err
		}
		pause = min(2*pause, maxPoll)
		next, err := r.store.GetUpload(ctx, u.ID)
		if err != nil {
			return TusUpload{}, err
		}
		u = next
	}
	return u, nil
}

// sleepUntil waits pause (cut to the deadline); ErrUploadLocked once the deadline has
// passed, ctx's error when it ends first.
func sleepUntil(ctx context.Context, deadline time.Time, pause time.Duration) error {
	left := time.Until(deadline)
	if left <= 0 {
		return ErrUploadLocked
	}
	t := time.NewTimer(min(pause, left))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// askRelease asks the holder of the upload's lease to let go: through the store (the
// row and a notification that reaches every gateway), and directly when it runs here.
func (r *Resumable) askRelease(ctx context.Context, id uuid.UUID) error {
	holder, ok, err := r.store.AskRelease(ctx, id)
	if err != nil || !ok {
		return err
	}
	r.holders.ask(holder)
	return nil
}

// AskRelease is what the store's listener calls when a request asked the lease
// holder holder to let go: a PATCH of this gateway holding it stops reading, stores
// what it has and gives the lease back.
func (r *Resumable) AskRelease(holder uuid.UUID) { r.holders.ask(holder) }

// holders are the requests of this gateway that hold (or are about to take) a lease,
// by lease owner, each with the function that asks it to let go.
type holders struct {
	mu sync.Mutex
	m  map[uuid.UUID]func()
}

// add registers owner's ask until the returned function is called.
func (h *holders) add(owner uuid.UUID, ask func()) (remove func()) {
	h.mu.Lock()
	h.m[owner] = ask
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.m, owner)
		h.mu.Unlock()
	}
}

// ask asks owner to let go when it runs here.
func (h *holders) ask(owner uuid.UUID) {
	h.mu.Lock()
	ask := h.m[owner]
	h.mu.Unlock()
	if ask != nil {
		ask()
	}
}

// Why a PATCH stops before its body ends.
var (
	// errHandedOver: another request for the upload asked it to let go.
	errHandedOver = &app.Error{Kind: app.KindBadRequest, Detail: "another request for this upload took it over; what reached the gateway is kept: ask HEAD for the offset"}
	// errLeaseLost: its lease could not be renewed; another request may hold the
	// upload now, so it stores nothing more.
	errLeaseLost = &app.Error{Kind: app.KindLocked, Detail: "this request lost its hold on the upload and stopped; ask HEAD for the offset"}
)

// lease is a running PATCH's hold on its upload, as its renewals find it.
type lease struct {
	length time.Duration
	stop   func() // interrupts the body; nil: the next Read stops instead
	// renew extends the lease now and says whether another request asked for it
	// (ErrUploadLocked: lost).
	renew func() (asked bool, err error)

	mu       sync.Mutex
	until    time.Time // the lease surely runs until then (local clock)
	asked    bool
	lost     error // why the lease is lost; nil while it holds
	stopOnce sync.Once
}

func newLease(length time.Duration, stop func()) *lease {
	return &lease{length: length, stop: stop}
}

// renewed records a renewal (or the lock) sent at start that found the lease held.
func (l *lease) renewed(start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = start.Add(l.length)
}

// ask records that another request asked for the upload, and interrupts the body.
func (l *lease) ask() {
	l.mu.Lock()
	l.asked = true
	l.mu.Unlock()
	l.interrupt()
}

// lose records that the lease is gone (or cannot be known to hold), and interrupts
// the body.
func (l *lease) lose(err error) {
	l.mu.Lock()
	if l.lost == nil {
		l.lost = err
	}
	l.mu.Unlock()
	l.interrupt()
}

func (l *lease) interrupt() {
	if l.stop != nil {
		l.stopOnce.Do(l.stop)
	}
}

// holds returns nil while the PATCH may still write: its lease is not lost and holds
// now. When the renewals are late (the lease may have lapsed since the last one that
// held it), it renews first: a PATCH writes nothing on a lease it cannot be sure of.
func (l *lease) holds() error {
	l.mu.Lock()
	lost, until := l.lost, l.until
	l.mu.Unlock()
	if lost != nil || until.IsZero() || time.Now().Before(until) || l.renew == nil {
		return lost
	}
	l.renewNow(true)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// renewNow renews the lease and records what the renewal found. A failed renewal
// loses the lease when strict (the caller must know), else it is left to the next one
// (or to holds, once the lease may have lapsed).
func (l *lease) renewNow(strict bool) {
	start := time.Now()
	asked, err := l.renew()
	switch {
	case errors.Is(err, ErrUploadLocked):
		l.lose(errLeaseLost)
	case err != nil:
		if strict {
			l.lose(fmt.Errorf("renew an upload's lease: %w", err))
		}
	default:
		l.renewed(start)
		if asked {
			l.ask()
		}
	}
}

// lostErr says why the lease is lost, nil while it is not known to be.
func (l *lease) lostErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// wasAsked says whether another request asked for the upload.
func (l *lease) wasAsked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.asked
}

// interrupted says why the body must not be read on: errLeaseLost (or the renewal's
// failure), errHandedOver, or nil.
func (l *lease) interrupted() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	if l.asked {
		return errHandedOver
	}
	return nil
}

// leaseBody is a PATCH's body that stops as soon as its lease is lost, and once it is
// asked for.
type leaseBody struct {
	r io.Reader
	l *lease
}

// Asked to let go, it still reads what the client has already sent, as long as the
// transport's Stop lets it (see Chunk.Stop): those bytes reached the gateway and are
// kept. Without a Stop it ends at once.
func (b *leaseBody) Read(p []byte) (int, error) {
	if err := b.l.lostErr(); err != nil {
		return 0, err
	}
	if b.l.stop == nil && b.l.wasAsked() {
		return 0, errHandedOver
	}
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		if why := b.l.interrupted(); why != nil {
			err = why // the interruption made the read fail
		}
	}
	return n, err
}

// keepLease renews the upload's lease while a PATCH runs, until the returned function
// is called. A renewal that finds another request's ask to let go interrupts the PATCH
// like the ask's notification (which may have been missed); one that finds the lease
// gone stops it at once. (One that fails is left to the next; before writing, the
// PATCH renews itself once the lease may have lapsed: lease.holds.)
func (r *Resumable) keepLease(ctx context.Context, id, owner uuid.UUID, l *lease) func() {
	return packages.RenewEvery(ctx, r.cfg.Lease/3, func(context.Context) { l.renewNow(false) })
}
