package webhookadmin

import (
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Webhook is a subscription: where the dispatcher POSTs the selected events, signed
// with Secret. The store holds Secret and PreviousSecret sealed (SecretSealer); only
// Service.Create returns Secret in clear, once.
type Webhook struct {
	ID          int64
	URL         string
	Description string
	// Events are the selected package.* event types, in the order of events.Types;
	// every type when AllEvents.
	Events []string
	// AllEvents: the subscription chose every event type, those added later included
	// (stored as such, not as today's list).
	AllEvents bool
	Secret    string
	// After a rotation the old secret also signs webhook-signature until
	// PreviousSecretUntil.
	PreviousSecret      *string
	PreviousSecretUntil *time.Time
	Active              bool
	DisabledReason      *string // why it is inactive; nil while active
	DisabledAt          *time.Time
	FailingSince        *time.Time // the first failed attempt since the last success
	// FailuresCountedFrom: failures before it do not count towards FailingSince (set
	// when an admin turns the subscription on).
	FailuresCountedFrom *time.Time
	LastSuccessAt       *time.Time
	// MaxInFlight is how many of its deliveries may be in flight at once, across every
	// dispatcher instance (1–256).
	MaxInFlight int
	// RateLimit is how many deliveries per second it gets at most; nil: no limit.
	RateLimit *int
	// Ordering is OrderingPackage when each package's events reach it one after the
	// other, in the order they happened; OrderingNone otherwise.
	Ordering  string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// NewWebhook is the input of Service.Create. Nil fields take their defaults.
type NewWebhook struct {
	URL         *string
	Events      *[]string
	Description *string
	MaxInFlight *int
	RateLimit   *int    // nil: no limit
	Ordering    *string // nil: OrderingNone
}

// WebhookPatch changes some fields of a subscription; nil fields stay as they are.
type WebhookPatch struct {
	URL         *string
	Events      *[]string
	Description *string
	Active      *bool
	MaxInFlight *int
	// RateLimit, when Set, changes the rate limit: to Value, or none when Value is nil.
	RateLimit app.Nullable[int]
	Ordering  *string
}

// DeliveryStatus is where a delivery is: being tried, done, or given up on.
type DeliveryStatus string

// The delivery statuses.
const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliverySucceeded DeliveryStatus = "succeeded"
	DeliveryFailed    DeliveryStatus = "failed"
)

// WebhookAttempt is one attempt to deliver an event to a subscription, with the
// current status of its delivery.
type WebhookAttempt struct {
	ID              int64
	DeliveryID      uuid.UUID
	EventID         string
	Event           string
	Attempt         int
	StatusCode      *int
	Error           *string
	DurationMS      int
	ResponseExcerpt *string
	CreatedAt       time.Time
	DeliveryStatus  DeliveryStatus
}

// WebhookAttemptFilter pages a subscription's attempts (newest first).
type WebhookAttemptFilter struct {
	WebhookID int64
	Limit     int
	BeforeID  int64 // 0: from the newest
}
