package app

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// ErrNoSlot is Slots' answer for a file whose package holds its share of the slots
// while no slot is free (or files of other packages wait for one): its message is
// handed back for a moment, so that the files behind it are reached.
var ErrNoSlot = errors.New("no scan slot for this package now")

// Slots are an instance's scan slots, shared fairly among packages. A package takes any
// free slot while no file of another package waits for one; a file of a package that
// holds fewer than its share waits for the next slot freed (first come, first served);
// a file of a package at its share lingers for a slot freed while no other package's
// file waits, while fewer files linger than there are slots, and finds none
// (ErrNoSlot) when it cannot linger or its linger ends first. So one request link with
// hundreds of files keeps every slot busy while it is alone (a slot freed goes to a
// lingering file at once, not to a message handed back and due later), the pull loops
// left over still look past its files for another package's, and a file of another
// package gets a slot as soon as one scan ends.
type Slots struct {
	mu        sync.Mutex
	n         int // slots, held or free
	free      int
	share     int
	linger    time.Duration
	held      map[string]int
	waiting   []*slotWaiter // first come, first served
	lingering []*slotWaiter // served after every waiting file
}

// SlotLinger is how long a file that finds no slot lingers for one before its message is
// handed back (for another instance, or a later slot).
const SlotLinger = time.Second

type slotWaiter struct {
	pkg   string
	ready chan struct{} // closed when a slot was handed over
}

// NewSlots returns n slots, of which a package takes share while others wait; up to n
// files at their package's share linger up to linger each for a slot (linger 0: none
// lingers, ErrNoSlot at once).
func NewSlots(n, share int, linger time.Duration) *Slots {
	n = max(1, n)
	return &Slots{n: n, free: n, share: max(1, share), linger: linger, held: map[string]int{}}
}

// Admission is what becomes of a file asking for a slot.
type Admission int

// Admissions.
const (
	Take  Admission = iota // a free slot, now
	Wait                   // the next slot freed
	Defer                  // linger for a slot no one else waits for, else hand the message back
)

// Admit is the rule of Slots: a file of a package holding held slots, with free slots
// free and waiting files of other packages queued for one, takes a free slot when no
// one waits, waits for one while its package holds less than share, and is deferred
// otherwise.
func Admit(held, share, free, waiting int) Admission {
	switch {
	case free > 0 && waiting == 0:
		return Take
	case held < share:
		return Wait
	default:
		return Defer
	}
}

// Acquire takes a slot for a file of package pkg, waiting or lingering for one as Admit
// says, and returns the function that gives it back. It returns ErrNoSlot when the file
// is to be deferred (no slot by the end of its linger), and ctx's error when ctx ends
// while it waits.
func (s *Slots) Acquire(ctx context.Context, pkg string) (release func(), err error) {
	s.mu.Lock()
	queue := &s.waiting
	switch Admit(s.held[pkg], s.share, s.free, len(s.waiting)) {
	case Take:
		s.free--
		s.held[pkg]++
		s.mu.Unlock()
		return s.releaser(pkg), nil
	case Defer:
		if s.linger <= 0 || len(s.lingering) >= s.n {
			s.mu.Unlock()
			return nil, ErrNoSlot
		}
		queue = &s.lingering
	}
	w := &slotWaiter{pkg: pkg, ready: make(chan struct{})}
	*queue = append(*queue, w)
	s.mu.Unlock()
	var expired <-chan time.Time
	if queue == &s.lingering {
		t := time.NewTimer(s.linger)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-w.ready:
		return s.releaser(pkg), nil
	case <-expired:
		err = ErrNoSlot
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.mu.Lock()
	if i := slices.Index(*queue, w); i >= 0 {
		*queue = slices.Delete(*queue, i, i+1)
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	// Handed a slot just as it gave up: a linger that ended keeps it, a context that
	// ended gives it back.
	if errors.Is(err, ErrNoSlot) {
		return s.releaser(pkg), nil
	}
	s.release(pkg)
	return nil, err
}

func (s *Slots) releaser(pkg string) func() {
	var once sync.Once
	return func() { once.Do(func() { s.release(pkg) }) }
}

// release gives pkg's slot to the first waiting file, else to the first lingering one,
// or frees it.
func (s *Slots) release(pkg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[pkg]--; s.held[pkg] <= 0 {
		delete(s.held, pkg)
	}
	queue := &s.waiting
	if len(*queue) == 0 {
		queue = &s.lingering
	}
	if len(*queue) == 0 {
		s.free++
		return
	}
	w := (*queue)[0]
	*queue = (*queue)[1:]
	s.held[w.pkg]++
	close(w.ready)
}

// deferDelay is how long a deferred message waits before it is delivered again: a
// quarter second more each time, up to 5s, so that a backlog of thousands of one
// package's files does not keep the consumer delivering only those while the files of
// other packages wait behind them.
func deferDelay(numDelivered uint64) time.Duration {
	return min(time.Duration(max(numDelivered, 1))*250*time.Millisecond, 5*time.Second)
}
