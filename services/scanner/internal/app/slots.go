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
// a file of a package at its share finds no slot (ErrNoSlot). So one request link with
// hundreds of files uses every slot while it is alone, and a file of another package
// gets a slot as soon as one scan ends.
type Slots struct {
	mu      sync.Mutex
	free    int
	share   int
	held    map[string]int
	waiting []*slotWaiter // first come, first served
}

type slotWaiter struct {
	pkg   string
	ready chan struct{} // closed when a slot was handed over
}

// NewSlots returns n slots, of which a package takes share while others wait.
func NewSlots(n, share int) *Slots {
	return &Slots{free: max(1, n), share: max(1, share), held: map[string]int{}}
}

// Admission is what becomes of a file asking for a slot.
type Admission int

// Admissions.
const (
	Take  Admission = iota // a free slot, now
	Wait                   // the next slot freed
	Defer                  // none: hand the message back for a moment
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

// Acquire takes a slot for a file of package pkg, waiting for one if Admit says so, and
// returns the function that gives it back. It returns ErrNoSlot when the file is to be
// deferred, and ctx's error when ctx ends while it waits.
func (s *Slots) Acquire(ctx context.Context, pkg string) (release func(), err error) {
	s.mu.Lock()
	switch Admit(s.held[pkg], s.share, s.free, len(s.waiting)) {
	case Take:
		s.free--
		s.held[pkg]++
		s.mu.Unlock()
		return s.releaser(pkg), nil
	case Defer:
		s.mu.Unlock()
		return nil, ErrNoSlot
	}
	w := &slotWaiter{pkg: pkg, ready: make(chan struct{})}
	s.waiting = append(s.waiting, w)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return s.releaser(pkg), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if i := slices.Index(s.waiting, w); i >= 0 {
		s.waiting = slices.Delete(s.waiting, i, i+1)
		s.mu.Unlock()
		return nil, ctx.Err()
	}
	s.mu.Unlock()
	s.release(pkg) // handed a slot just as ctx ended
	return nil, ctx.Err()
}

func (s *Slots) releaser(pkg string) func() {
	var once sync.Once
	return func() { once.Do(func() { s.release(pkg) }) }
}

// release gives pkg's slot to the first waiting file, or frees it.
func (s *Slots) release(pkg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[pkg]--; s.held[pkg] <= 0 {
		delete(s.held, pkg)
	}
	if len(s.waiting) == 0 {
		s.free++
		return
	}
	w := s.waiting[0]
	s.waiting = s.waiting[1:]
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
