package app

import (
	"fmt"
	"time"

	"github.com/sethvargo/go-retry"
)

// JitterPercent is the ± jitter applied to each wait of the retry schedule.
const JitterPercent = 10

// RetryWait returns the wait after failed attempt number attempt (1-based, counted in
// the delivery's current round): schedule[attempt-1] ± JitterPercent %, from a go-retry
// backoff that steps through the schedule. It returns false when the schedule is
// exhausted, i.e. attempt was the last one (len(schedule)+1 attempts in a round).
func RetryWait(schedule []time.Duration, attempt int) (time.Duration, bool) {
	if attempt < 1 || attempt > len(schedule) {
		return 0, false
	}
	d, stop := retry.WithJitterPercent(JitterPercent, scheduleBackoff(schedule[attempt-1:])).Next()
	return d, !stop
}

// scheduleBackoff is a go-retry backoff returning the schedule's waits in order, then stop.
func scheduleBackoff(schedule []time.Duration) retry.Backoff {
	i := 0
	return retry.BackoffFunc(func() (time.Duration, bool) {
		if i >= len(schedule) {
			return 0, true
		}
		d := schedule[i]
		i++
		return d, false
	})
}

// TransientDelay is the wait before a message whose handling hit a database or NATS
// error is tried again: 1s, doubling with each delivery of the message, at most 1m.
func TransientDelay(numDelivered uint64) time.Duration {
	d := time.Second
	for n := uint64(1); n < numDelivered && d < time.Minute; n++ {
		d *= 2
	}
	return min(d, time.Minute)
}

// humanDuration says d the way an admin reads it: "5 days", "36 hours", "90m0s".
func humanDuration(d time.Duration) string {
	day := 24 * time.Hour
	switch {
	case d >= day && d%day == 0:
		return plural(int64(d/day), "day")
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int64(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int64(d/time.Minute), "minute")
	default:
		return d.String()
	}
}

func plural(n int64, unit string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", unit)
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
