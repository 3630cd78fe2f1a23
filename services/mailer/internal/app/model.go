// Package app is what the mailer does: it turns each mail job (eventsv1.MailJob) into
// the recipient's e-mail — subject, plain-text and HTML parts rendered from templates
// embedded in the binary — sends it once, retries transient SMTP failures on a
// schedule, and records every job's outcome (mail_deliveries) and every sent or finally
// failed e-mail (the package's audit log).
//
// It declares the interfaces it needs (a store, a sender) and knows nothing of
// PostgreSQL, NATS or SMTP libraries; internal/store and internal/transport provide them.
package app

import (
	"errors"
	"fmt"
	"time"
)

// Job kinds (MailJob.kind).
const (
	KindOutbound = "outbound" // files shared with the recipient: a download button
	KindInbound  = "inbound"  // files requested from the recipient: an upload button
)

// Delivery states (mail_deliveries.state).
const (
	StatePending = "pending" // attempted, will be retried
	StateSent    = "sent"    // accepted by the SMTP server
	StateFailed  = "failed"  // rejected for good, or out of retries
)

// Audit actions the mailer writes (actor "system").
const (
	ActionSent   = "mail.sent"
	ActionFailed = "mail.failed"
)

// Errors of the mailer's parts.
var (
	// ErrBusy: another instance is sending the job right now.
	ErrBusy = errors.New("mail job is being sent by another instance")
)

// Job is a decoded, checked mail job.
type Job struct {
	ID             string // UUID; the key of mail_deliveries
	Kind           string // KindOutbound or KindInbound
	PackageID      string // UUID
	Title          string
	Note           string
	RecipientEmail string
	RecipientName  string
	OwnerName      string
	OwnerEmail     string
	// MagicLink is the recipient's credential: never logged, never recorded.
	MagicLink string
	ExpiresAt time.Time
	// Encrypted: the package is end-to-end encrypted (the e-mail says so).
	Encrypted bool
	// Language is the recipient's language (pkg/i18n); English when empty or not
	// supported.
	Language string
}

// Email is one rendered e-mail, ready for a Sender.
type Email struct {
	// JobID names the e-mail: its Message-ID is derived from it, so a copy sent twice
	// (a crash between sending and recording) carries the same Message-ID.
	JobID string
	// To is the recipient: Name (may be empty) and Address.
	To Address
	// ReplyTo is the package owner, so the recipient's answer reaches them; its
	// Address is empty when the owner's address is unusable.
	ReplyTo Address
	// SenderName is the display name for the From header when the configured sender
	// has none, e.g. "Alice Example (via shipfile)".
	SenderName string
	Subject    string
	Text       string // text/plain part
	HTML       string // text/html part
	// Language is the e-mail's language (its Content-Language header); empty: none.
	Language string
}

// Address is a mailbox: a display name and an e-mail address. Both are single lines.
type Address struct {
	Name    string
	Address string
}

// Rejection is a send that the SMTP server refused for good: a 5xx reply to the
// message's transaction (MAIL FROM, RCPT TO, DATA). Retrying would only be refused again.
type Rejection struct {
	Code  int    // the SMTP reply code, 5xx
	Reply string // the server's reply text, for the audit log
}

func (r *Rejection) Error() string { return "rejected: " + r.Text() }

// Text is the reply as the server gave it: "550 5.1.1 mailbox unavailable".
func (r *Rejection) Text() string {
	if r.Code == 0 {
		return r.Reply
	}
	return fmt.Sprintf("%d %s", r.Code, r.Reply)
}

// Delivery is a job's record as the store holds it when an attempt starts.
type Delivery struct {
	State    string
	Attempts int // attempts made before this one
	// PackageState is the package's state now ("active", "revoked", "expired", …), ""
	// when the package is gone. Only an active package's link is worth an e-mail.
	PackageState string
}

// Outcome is what an attempt writes: the record's new state and, for a sent or finally
// failed e-mail, an audit entry. The zero Outcome writes nothing.
type Outcome struct {
	State     string // StatePending, StateSent or StateFailed; "" writes nothing
	Attempted bool   // an attempt was made: attempts + 1
	Error     string // the last error, "" when sent
	MessageID string // of a sent e-mail
	// AuditAction and AuditDetail make an audit_log row (actor "system") when set.
	AuditAction string
	AuditDetail string
	// RetryIn is when a pending owner notification is tried again.
	RetryIn time.Duration
}
