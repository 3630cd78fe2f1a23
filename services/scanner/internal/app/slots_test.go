package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/scanner/internal/app"
)

func TestAdmit(t *testing.T) {
	tests := []struct {
		name                       string
		held, share, free, waiting int
		want                       app.Admission
	}{
		{"alone, a slot free", 3, 2, 1, 0, app.Take},
		{"first file, a slot free", 0, 2, 4, 0, app.Take},
		{"under its share, none free", 1, 2, 0, 0, app.Wait},
		{"under its share, others wait first", 0, 2, 1, 1, app.Wait},
		{"at its share, none free", 2, 2, 0, 0, app.Defer},
		{"over its share, others wait", 3, 2, 1, 1, app.Defer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := app.Admit(tt.held, tt.share, tt.free, tt.waiting); got != tt.want {
				t.Errorf("Admit(%d, %d, %d, %d) = %v, want %v", tt.held, tt.share, tt.free, tt.waiting, got, tt.want)
			}
		})
	}
}

// One package alone takes every slot; its next file is deferred; a file of another
// package waits and takes the first slot freed, before the first package's next file.
func TestSlotsShareAmongPackages(t *testing.T) {
	ctx := context.Background()
	s := app.NewSlots(4, 2, 0)
	var held []func()
	for i := range 4 {
		release, err := s.Acquire(ctx, "a")
		if err != nil {
			t.Fatalf("a's file %d: %v, want a slot (a is alone)", i, err)
		}
		held = append(held, release)
	}
	if _, err := s.Acquire(ctx, "a"); !errors.Is(err, app.ErrNoSlot) {
		t.Fatalf("a's fifth file: %v, want ErrNoSlot", err)
	}
	type result struct {
		release func()
		err     error
	}
	got := make(chan result, 1)
	go func() {
		release, err := s.Acquire(ctx, "b")
		got <- result{release, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("b's file had a slot with none free: %v", r.err)
	case <-time.After(50 * time.Millisecond):
	}
	held[0]()
	held[0]() // a release is given back once
	b := <-got
	if b.err != nil {
		t.Fatalf("b's file: %v", b.err)
	}
	// b holds the slot a freed: a, at 3 of 4 slots, finds none.
	if _, err := s.Acquire(ctx, "a"); !errors.Is(err, app.ErrNoSlot) {
		t.Fatalf("a's file while b's scans: %v, want ErrNoSlot", err)
	}
	// b done: a is alone again and takes the free slot.
	b.release()
	if _, err := s.Acquire(ctx, "a"); err != nil {
		t.Fatalf("a's file once b's ended: %v, want a slot", err)
	}
}

func TestSlotsWaitEndsWithContext(t *testing.T) {
	s := app.NewSlots(1, 1, 0)
	release, err := s.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Acquire(ctx, "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b waiting past its context: %v", err)
	}
	release()
	// b gave up its place: the slot is free for anyone.
	r, err := s.Acquire(context.Background(), "c")
	if err != nil {
		t.Fatalf("c after b gave up: %v", err)
	}
	r()
}
