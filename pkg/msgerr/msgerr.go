// Package msgerr holds the two errors a message handler's domain code returns to say
// what should become of a message it could not complete, without knowing of any queue:
// RetryAfter (hand it back, to be handled again after a delay) and Poison (it can never
// be handled). A nil error means done. Only the transport turns them into queue
// decisions (pkg/consumer's Decide: Ack, NakWithDelay, Term), the way watermill's
// retry and poison middleware read a handler's error.
package msgerr

import (
	"errors"
	"fmt"
	"time"
)

// retryError asks for the message again after delay.
type retryError struct {
	delay time.Duration
	err   error
}

func (e *retryError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("retry in %s", e.delay)
	}
	return e.err.Error()
}

func (e *retryError) Unwrap() error { return e.err }

// ErrPoison is what every error of Poison matches under errors.Is, and the reason of
// one given no cause.
var ErrPoison = errors.New("poison message")

// poisonError says the message can never be handled.
type poisonError struct{ err error }

func (e *poisonError) Error() string { return e.err.Error() }

func (e *poisonError) Unwrap() error { return e.err }

// Is makes a poisonError match ErrPoison.
func (e *poisonError) Is(target error) bool { return target == ErrPoison }

// RetryAfter returns an error asking for the message to be handled again after delay
// (at once when 0), because of err. err may be nil when the handler has already
// logged why (the transport then records no reason of its own).
func RetryAfter(delay time.Duration, err error) error {
	return &retryError{delay: max(delay, 0), err: err}
}

// Poison returns an error saying the message can never be handled because of err (a
// malformed body): it is terminated, with err's text as the reason. A nil err is
// reported as "poison message".
func Poison(err error) error {
	if err == nil {
		err = ErrPoison
	}
	return &poisonError{err: err}
}

// Delay reports whether err (or an error it wraps) is a RetryAfter, with its delay and
// the error it was given (nil when none).
func Delay(err error) (delay time.Duration, cause error, ok bool) {
	var r *retryError
	if errors.As(err, &r) {
		return r.delay, r.err, true
	}
	return 0, nil, false
}

// IsPoison reports whether err (or an error it wraps) is a Poison.
func IsPoison(err error) bool { return errors.Is(err, ErrPoison) }
