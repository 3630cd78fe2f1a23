package backoff

import (
	"strings"
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

func TestCheckSchedule(t *testing.T) {
	for _, tc := range []struct {
		name     string
		schedule []time.Duration
		ok       bool
	}{
		{"empty", nil, true},
		{"positive", []time.Duration{time.Second, time.Minute}, true},
		{"zero", []time.Duration{time.Second, 0}, false},
		{"negative", []time.Duration{-time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSchedule("SHIPFILE_X_RETRY_SCHEDULE", tc.schedule)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckSchedule(%v) = %v, want ok %v", tc.schedule, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "SHIPFILE_X_RETRY_SCHEDULE") {
				t.Fatalf("error %q does not name the setting", err)
			}
		})
	}
}
