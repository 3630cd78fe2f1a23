// Package backoff computes the waits between attempts of the consumers' jobs: a
// configured schedule stepped through with go-retry and jitter, and a short doubling wait
// for transient failures of the consumer's own dependencies.
package backoff

import (
	"errors"
	"time"

	"github.com/sethvargo/go-retry"
)

// JitterPercent is the ± jitter applied to each wait of the retry schedule.
const JitterPercent = 10

// RetryWait returns the wait after failed attempt number attempt (1-based):
// schedule[attempt-1] ± JitterPercent %, from a go-retry backoff that steps through the
// schedule. It returns false when the schedule is exhausted, i.e. attempt was the last
// one (a job gets len(schedule)+1 attempts; the dispatcher counts attempts per round).
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

// CheckSchedule returns an error naming the setting env when a wait of schedule is not
// positive, nil otherwise.
func CheckSchedule(env string, schedule []time.Duration) error {
	for _, d := range schedule {
		if d <= 0 {
			return errors.New(env + ": every wait must be positive")
		}
	}
	return nil
}
