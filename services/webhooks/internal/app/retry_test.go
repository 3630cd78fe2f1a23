package app

import (
	"testing"
	"time"
)

func TestRetryWait(t *testing.T) {
	schedule := []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour}
	for attempt, base := range schedule {
		attempt++
		for range 50 {
			d, ok := RetryWait(schedule, attempt)
			if !ok {
				t.Fatalf("attempt %d: schedule reported exhausted", attempt)
			}
			lo, hi := base*90/100, base*110/100
			if d < lo || d > hi {
				t.Fatalf("attempt %d: wait %s outside %s–%s", attempt, d, lo, hi)
			}
		}
	}
	for _, attempt := range []int{0, len(schedule) + 1, 100} {
		if _, ok := RetryWait(schedule, attempt); ok {
			t.Errorf("attempt %d: want exhausted", attempt)
		}
	}
	if _, ok := RetryWait(nil, 1); ok {
		t.Error("empty schedule: want exhausted after the first attempt")
	}
}

func TestTransientDelay(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {4, 8 * time.Second}, {7, time.Minute}, {1000, time.Minute}} {
		if got := TransientDelay(c.n); got != c.want {
			t.Errorf("TransientDelay(%d) = %s, want %s", c.n, got, c.want)
		}
	}
}

func TestHumanDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{120 * time.Hour, "5 days"},
		{24 * time.Hour, "1 day"},
		{36 * time.Hour, "36 hours"},
		{time.Hour, "1 hour"},
		{90 * time.Minute, "90 minutes"},
		{1500 * time.Millisecond, "1.5s"},
	} {
		if got := humanDuration(c.d); got != c.want {
			t.Errorf("humanDuration(%s) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestHookLimiter(t *testing.T) {
	l := newHookLimiter(2)
	for i := range 2 {
		if !l.tryAcquire(1) {
			t.Fatalf("slot %d refused", i+1)
		}
	}
	if l.tryAcquire(1) {
		t.Fatal("third slot granted")
	}
	if !l.tryAcquire(2) {
		t.Fatal("another hook is limited separately")
	}
	l.release(1)
	if !l.tryAcquire(1) {
		t.Fatal("released slot not reusable")
	}
}
