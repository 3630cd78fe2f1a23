package app

import (
	"context"
	"errors"
	"testing"
	"time"
)

// queued reports how many files wait and how many linger for a slot.
func (s *Slots) queued() (waiting, lingering int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting), len(s.lingering)
}

// untilQueued polls s until waiting and lingering files are queued, or fails t.
func untilQueued(t *testing.T, s *Slots, waiting, lingering int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		w, l := s.queued()
		if w == waiting && l == lingering {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queued: %d waiting and %d lingering, want %d and %d", w, l, waiting, lingering)
		}
		time.Sleep(time.Millisecond)
	}
}

// take acquires n slots for files of pkg, each at once, and returns their releases.
func take(t *testing.T, s *Slots, pkg string, n int) []func() {
	t.Helper()
	var held []func()
	for i := range n {
		release, err := s.Acquire(context.Background(), pkg)
		if err != nil {
			t.Fatalf("%s's file %d: %v, want a free slot", pkg, i, err)
		}
		held = append(held, release)
	}
	return held
}

type acquired struct {
	release func()
	err     error
}

func acquireAsync(s *Slots, pkg string) <-chan acquired {
	got := make(chan acquired, 1)
	go func() {
		release, err := s.Acquire(context.Background(), pkg)
		got <- acquired{release, err}
	}()
	return got
}

// A package alone with more files than slots: its next file lingers and takes the first
// slot freed, so no slot stays idle while its messages are handed back.
func TestSlotsLingeringFileTakesTheSlotFreed(t *testing.T) {
	s := NewSlots(2, 1, time.Minute)
	held := take(t, s, "a", 2)
	third := acquireAsync(s, "a")
	untilQueued(t, s, 0, 1)
	held[0]()
	select {
	case r := <-third:
		if r.err != nil {
			t.Fatalf("a's lingering file: %v, want the slot freed", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a's lingering file did not take the slot freed")
	}
	if w, l := s.queued(); w != 0 || l != 0 || s.free != 0 {
		t.Fatalf("after the hand-over: %d waiting, %d lingering, %d free; want none", w, l, s.free)
	}
}

// A file of another package that waits takes a freed slot before a lingering file,
// which takes the next one.
func TestSlotsWaitingFileBeforeALingeringOne(t *testing.T) {
	s := NewSlots(2, 1, time.Minute)
	held := take(t, s, "a", 2)
	lingering := acquireAsync(s, "a")
	untilQueued(t, s, 0, 1)
	waiting := acquireAsync(s, "b")
	untilQueued(t, s, 1, 1)
	held[0]()
	b := <-waiting
	if b.err != nil {
		t.Fatalf("b's file: %v", b.err)
	}
	untilQueued(t, s, 0, 1) // a's file still lingers
	held[1]()
	if a := <-lingering; a.err != nil {
		t.Fatalf("a's lingering file once b had its slot: %v", a.err)
	}
}

// A file whose linger ends without a slot is deferred and leaves no trace in the queue.
func TestSlotsLingerEnds(t *testing.T) {
	s := NewSlots(1, 1, 20*time.Millisecond)
	release, err := s.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.Acquire(context.Background(), "a"); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("a's second file: %v, want ErrNoSlot", err)
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("deferred after %v, before its linger of 20ms", took)
	}
	untilQueued(t, s, 0, 0)
	release()
	r, err := s.Acquire(context.Background(), "c")
	if err != nil {
		t.Fatalf("c once a's slot was freed: %v", err)
	}
	r()
}

// No more files linger than there are slots: the next is deferred at once, so a pull
// loop is left to look past the package's files.
func TestSlotsLingerAsManyAsSlots(t *testing.T) {
	s := NewSlots(2, 1, time.Minute)
	held := take(t, s, "a", 2)
	first, second := acquireAsync(s, "a"), acquireAsync(s, "a")
	untilQueued(t, s, 0, 2)
	if _, err := s.Acquire(context.Background(), "a"); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("a's fifth file with two lingering: %v, want ErrNoSlot at once", err)
	}
	for _, release := range held {
		release()
	}
	for _, got := range []<-chan acquired{first, second} {
		if r := <-got; r.err != nil {
			t.Fatalf("a lingering file once the slots were freed: %v", r.err)
		}
	}
}
