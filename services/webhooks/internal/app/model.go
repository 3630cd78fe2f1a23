// Package app is what the webhook dispatcher does: it fans each package event out to
// the subscriptions that selected it (one delivery job per event × subscription; the
// delivery's row is written with its first attempt) and delivers each job as a signed POST, retrying on a schedule, keeping
// a log of every attempt and disabling subscriptions whose receivers are gone.
//
// It declares the interfaces it needs (a store, a job publisher, a sender of requests)
// and knows nothing of PostgreSQL, NATS or HTTP clients; internal/store and
// internal/transport provide them.
package app

import (
	"errors"
	"slices"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/webhooks/internal/signing"
)

// A subscription's orderings (webhook_subscriptions.ordering).
const (
	OrderingNone    = "none"
	OrderingPackage = "package"
)

// Delivery states (webhook_deliveries.status).
const (
	StatusPending   = "pending"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Errors of the stores.
var (
	// ErrNotFound: the delivery or subscription does not exist (any more).
	ErrNotFound = errors.New("not found")
)

// NewDelivery is a delivery row to insert without an attempt (tests and tools): one
// event for one subscription.
type NewDelivery struct {
	ID             string // UUIDv5 of event id and hook id: the same on every hand-out
	SubscriptionID int64
	EventID        string
	Event          string // event type, e.g. "package.finalized"
	Body           []byte // the exact JSON body of every attempt
}

// Delivery is a delivery row and the subscription it goes to (from the cache).
type Delivery struct {
	ID             string
	SubscriptionID int64
	EventID        string
	Event          string
	Body           []byte
	Status         string
	Attempts       int // in all
	RoundAttempts  int // in the current round (a redelivery starts a new round)
	// CreatedAt is when its event was stored on the stream (its row's created_at).
	CreatedAt time.Time
	// PackageID and PackageSeq are its event's package and the event's number among
	// the package's events (X-Service-Sequence); empty and 0 for an event without them.
	PackageID    string
	PackageSeq   uint64
	Subscription Subscription
}

// Subscription is what the dispatcher needs of a webhook subscription; each instance
// keeps them all in a cache (Subscriptions).
type Subscription struct {
	ID     int64
	URL    string
	Secret string
	// PreviousSecret also signs webhook-signature until PreviousSecretUntil, after a
	// rotation; empty when there is none.
	PreviousSecret      string
	PreviousSecretUntil time.Time
	Active              bool
	// Events are the selected event types; nil selects every event type, those added
	// later included.
	Events    []string
	CreatedAt time.Time
	// MaxInFlight is how many of its deliveries may be in flight at once, across every
	// dispatcher instance (1–256).
	MaxInFlight int
	// RateLimit is how many deliveries per second it gets at most, across every
	// instance; 0: no limit.
	RateLimit int
	// Ordering is OrderingPackage when each package's events go to it one after the
	// other, in the order they happened; OrderingNone otherwise.
	Ordering string
	// SecretError says why its secrets could not be opened (a key this instance lacks);
	// its deliveries wait (transient) while it is set, the others go on.
	SecretError error

	// signers sign with Secret and PreviousSecret, made once when the cache takes the
	// subscription in (withSigners); nil: Headers makes them for the one attempt.
	signers *signers
}

type signers struct{ current, previous *signing.Signer }

// withSigners returns s with its signers made.
func withSigners(s Subscription) Subscription {
	s.signers = &signers{current: signing.NewSigner(s.Secret)}
	if s.PreviousSecret != "" {
		s.signers.previous = signing.NewSigner(s.PreviousSecret)
	}
	return s
}

// Ordered reports whether s gets each package's events one after the other.
func (s Subscription) Ordered() bool { return s.Ordering == OrderingPackage }

// Selects reports whether an event of type typ that occurred at occurredAt goes to s:
// s is active, selected typ (or every type), and existed when the event occurred
// (events older than a subscription, which its consumer may be handed when it starts,
// do not reach it). webhook.test is never selected; it goes to its one
// subscription.
func (s Subscription) Selects(typ string, occurredAt time.Time) bool {
	if !s.Active || typ == events.TypeWebhookTest || s.CreatedAt.After(occurredAt) {
		return false
	}
	return s.Events == nil || slices.Contains(s.Events, typ)
}

// AttemptRecord is the outcome of one attempt: a webhook_attempts row and the
// delivery's counters and status, written with other attempts in one statement. The
// subscription's health is derived from the attempts later, off the hot path.
type AttemptRecord struct {
	DeliveryID     string
	SubscriptionID int64
	// The delivery's event id, event type, body and creation time: its row is written
	// with its first attempt.
	EventID    string
	Event      string
	Body       []byte
	CreatedAt  time.Time
	PackageID  string
	PackageSeq uint64
	StatusCode int    // 0 when no response came
	Error      string // "" on success
	Duration   time.Duration
	// Excerpt is the start of the response body; HasResponse tells an empty body from
	// no response at all.
	Excerpt     string
	HasResponse bool
	Succeeded   bool
	// Status is the delivery's status after the attempt.
	Status string
	// DisableReason, when set, disables the subscription (if still active) with this
	// reason once the attempt is recorded (410 Gone: rare).
	DisableReason string
	// FinishOrder: the delivery is done (Status succeeded or failed) on an ordered
	// subscription; the same commit moves its package on (OrderStore.Finish) and says
	// which delivery goes next.
	FinishOrder bool
}

// Recorded is what recording an attempt gave: its number, and for a FinishOrder
// record, the delivery of its package released next ("" when none waits yet).
type Recorded struct {
	Attempt  int
	Released string
}
