// Package app is what the gateway does, independent of HTTP and SQL: identity (users,
// API tokens), packages and webhook subscriptions. Each service declares the Store it
// needs; internal/store implements them on PostgreSQL.
package app

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies an error so the transport can answer with the right status.
type Kind int

// The kinds of error the application reports.
const (
	KindInternal         Kind = iota // anything unexpected: 500
	KindInvalid                      // the input breaks a rule: 422
	KindUnauthenticated              // no valid credential: 401
	KindForbidden                    // valid credential, not allowed: 403
	KindNotFound                     // no such thing: 404
	KindConflict                     // clashes with the current state: 409
	KindGone                         // existed, or might have, and is no more: 410
	KindTooLarge                     // over a size limit: 413
	KindBadRequest                   // a request body that broke off or cannot be read: 400
	KindTooMany                      // over a per-client limit: 429 with Retry-After
	KindBusy                         // over a limit of the whole gateway: 503 with Retry-After
	KindTimeout                      // a request body too slow to wait for: 408
	KindLocked                       // another request holds the resource (a resumable upload): 423
	KindChecksumMismatch             // a chunk does not match its Upload-Checksum: 460
)

// Error is an application error with a kind and a message safe to show the caller.
type Error struct {
	Kind   Kind
	Detail string
	// RetryAfter is how long the caller should wait before trying again (KindTooMany,
	// KindBusy); zero when it does not apply.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Detail }

// Is matches errors of the same kind, so errors.Is(err, ErrNotFound) works for any
// not-found error whatever its detail.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind
}

// Sentinel errors, one per kind, for errors.Is.
var (
	ErrInvalid         = &Error{Kind: KindInvalid, Detail: "invalid input"}
	ErrUnauthenticated = &Error{Kind: KindUnauthenticated, Detail: "missing, invalid or expired token"}
	ErrForbidden       = &Error{Kind: KindForbidden, Detail: "not allowed"}
	ErrNotFound        = &Error{Kind: KindNotFound, Detail: "not found"}
	ErrConflict        = &Error{Kind: KindConflict, Detail: "conflict"}
)

// Invalid returns a validation error.
func Invalid(format string, args ...any) error {
	return &Error{Kind: KindInvalid, Detail: fmt.Sprintf(format, args...)}
}

// NotFound returns a not-found error naming what was missing.
func NotFound(what string) error {
	return &Error{Kind: KindNotFound, Detail: what + " not found"}
}

// Conflict returns a conflict error.
func Conflict(format string, args ...any) error {
	return &Error{Kind: KindConflict, Detail: fmt.Sprintf(format, args...)}
}

// Forbidden returns a permission error.
func Forbidden(detail string) error {
	return &Error{Kind: KindForbidden, Detail: detail}
}

// KindOf returns the kind of err, KindInternal when it is not an *Error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// TooMany returns a per-client limit error: the caller may retry after retryAfter.
func TooMany(retryAfter time.Duration, format string, args ...any) error {
	return &Error{Kind: KindTooMany, Detail: fmt.Sprintf(format, args...), RetryAfter: retryAfter}
}

// Busy returns a gateway-wide limit error: the caller may retry after retryAfter.
func Busy(retryAfter time.Duration, format string, args ...any) error {
	return &Error{Kind: KindBusy, Detail: fmt.Sprintf(format, args...), RetryAfter: retryAfter}
}
