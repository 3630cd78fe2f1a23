// Package events names shipfile's JetStream streams and subjects, creates the streams,
// and turns the protobuf contracts of package eventsv1 (an Envelope per package event, a
// MailJob per recipient e-mail) into outbox messages, so a service publishes them in the
// transaction of the change they announce.
//
// Package events go on SHIPFILE_EVENTS (subjects shipfile.events.<type>, kept for a
// while, fanned out to any number of consumers); mail jobs go on the work queue
// SHIPFILE_MAIL (subjects shipfile.mail.<kind>, removed once acknowledged). Each message's
// id is its Nats-Msg-Id, so a re-publish within the duplicate window is dropped.
//
// On the consuming side, Consume is the fetch loop of a worker on a durable pull
// consumer, KeepAlive holds a message while a long handler runs and NumDelivered says
// which delivery a message is.
package events

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/outbox"
)

// Stream names and subject prefixes.
const (
	// StreamEvents holds every package event, retained by limits (DefaultEventsMaxAge).
	StreamEvents = "SHIPFILE_EVENTS"
	// StreamMail is the work queue of mail jobs: a job is removed once acknowledged.
	StreamMail = "SHIPFILE_MAIL"
	// SubjectPrefix starts the subject of every package event.
	SubjectPrefix = "shipfile.events."
	// MailSubjectPrefix starts the subject of every mail job.
	MailSubjectPrefix = "shipfile.mail."
	// StreamWebhooks is the work queue of webhook delivery jobs waiting for their next
	// attempt (shipfile.webhooks.retry.<hook id>) and of redeliveries asked through the
	// API (shipfile.webhooks.<hook id>): the dispatcher moves each to its
	// subscription's due subject when it is due. It also holds the dispatcher's attempt
	// journal (shipfile.webhooks.journal.attempts): attempt records on their way to the
	// delivery log.
	StreamWebhooks = "SHIPFILE_WEBHOOKS"
	// WebhookSubjectPrefix starts the subject of every message on SHIPFILE_WEBHOOKS:
	// shipfile.webhooks.<hook id>, shipfile.webhooks.retry.<hook id>,
	// shipfile.webhooks.journal.attempts.
	WebhookSubjectPrefix = "shipfile.webhooks."
	// WebhookDueSubjectPrefix starts the subject of a delivery job that is due, on
	// SHIPFILE_EVENTS: shipfile.webhook-due.<hook id>. A subscription's consumer of
	// SHIPFILE_EVENTS takes its events and its due jobs, so first attempts and retries
	// share its max_in_flight. (Outside shipfile.events.>, which other services read.)
	WebhookDueSubjectPrefix = "shipfile.webhook-due."
)

// Version is the schema version of the eventsv1 payloads, set in Envelope.version.
const Version = 1

// The event types (TypePackageCreated, …) are constants generated from the event_type
// options of Envelope.data's fields in proto/events/v1/events.proto: types.gen.go
// (`make generate`); Types, AllTypes and TypeOf are read from the descriptor itself.

// Mail job kinds: the MailJob's kind and the last token of its subject.
const (
	MailKindOutbound = "outbound" // files shared with the recipient
	MailKindInbound  = "inbound"  // files requested from the recipient
)

// ErrInvalid is returned for an envelope or mail job that cannot be published as it is.
var ErrInvalid = errors.New("events: invalid message")

// Subject is the subject of a package event of the given type:
// Subject("package.created") == "shipfile.events.package.created".
func Subject(eventType string) string { return SubjectPrefix + eventType }

// MailSubject is the subject of a mail job of the given kind:
// MailSubject("outbound") == "shipfile.mail.outbound".
func MailSubject(kind string) string { return MailSubjectPrefix + kind }

// NewEventID returns a new event or job id: a UUIDv7, so ids sort by creation time.
func NewEventID() string {
	id, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only when the system's random source does; a v4 id is still unique.
		return uuid.NewString()
	}
	return id.String()
}

// NewEnvelope returns an envelope of the given type with a new event id, version
// Version and occurred_at set; the caller sets its data, e.g.
// env.Data = &eventsv1.Envelope_PackageCreated{PackageCreated: …}.
func NewEnvelope(eventType string, occurredAt time.Time) *eventsv1.Envelope {
	return &eventsv1.Envelope{
		EventId:    NewEventID(),
		Type:       eventType,
		Version:    Version,
		OccurredAt: timestamppb.New(occurredAt),
	}
}

// MarshalEnvelope encodes env (proto.Marshal) after checking it has an id, a type that
// is a valid subject token sequence and, when its data is set, agrees with the data.
func MarshalEnvelope(env *eventsv1.Envelope) ([]byte, error) {
	if err := validateEnvelope(env); err != nil {
		return nil, err
	}
	b, err := proto.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("events: marshal envelope %s: %w", env.GetEventId(), err)
	}
	return b, nil
}

// UnmarshalEnvelope decodes an envelope from a message body.
func UnmarshalEnvelope(data []byte) (*eventsv1.Envelope, error) {
	env := &eventsv1.Envelope{}
	if err := proto.Unmarshal(data, env); err != nil {
		return nil, fmt.Errorf("events: unmarshal envelope: %w", err)
	}
	return env, nil
}

// MarshalMailJob encodes job (proto.Marshal) after checking it has an id and a kind.
func MarshalMailJob(job *eventsv1.MailJob) ([]byte, error) {
	if err := validateMailJob(job); err != nil {
		return nil, err
	}
	b, err := proto.Marshal(job)
	if err != nil {
		return nil, fmt.Errorf("events: marshal mail job %s: %w", job.GetJobId(), err)
	}
	return b, nil
}

// UnmarshalMailJob decodes a mail job from a message body.
func UnmarshalMailJob(data []byte) (*eventsv1.MailJob, error) {
	job := &eventsv1.MailJob{}
	if err := proto.Unmarshal(data, job); err != nil {
		return nil, fmt.Errorf("events: unmarshal mail job: %w", err)
	}
	return job, nil
}

// EventMessage builds the outbox message that publishes env on Subject(env.Type) with
// env.EventId as Nats-Msg-Id.
func EventMessage(env *eventsv1.Envelope) (outbox.Message, error) {
	b, err := MarshalEnvelope(env)
	if err != nil {
		return outbox.Message{}, err
	}
	return outbox.Message{ID: env.GetEventId(), Subject: Subject(env.GetType()), Data: b}, nil
}

// MailMessage builds the outbox message that puts job on the mail queue, subject
// MailSubject(job.Kind), with job.JobId as Nats-Msg-Id. It is ephemeral: the job carries
// the raw magic link, so its payload is erased from the outbox once published.
func MailMessage(job *eventsv1.MailJob) (outbox.Message, error) {
	b, err := MarshalMailJob(job)
	if err != nil {
		return outbox.Message{}, err
	}
	return outbox.Message{ID: job.GetJobId(), Subject: MailSubject(job.GetKind()), Data: b, Ephemeral: true}, nil
}

// WebhookSubject is the subject of the delivery jobs of one subscription:
// WebhookSubject(7) == "shipfile.webhooks.7".
func WebhookSubject(hookID int64) string { return fmt.Sprintf("%s%d", WebhookSubjectPrefix, hookID) }

// WebhookJobMessage builds the outbox message that queues a delivery job on
// SHIPFILE_WEBHOOKS. msgID is its Nats-Msg-Id: the delivery id for the first delivery,
// something new for each redelivery, so a redelivery is not dropped as a duplicate.
func WebhookJobMessage(job *eventsv1.WebhookJob, msgID string) (outbox.Message, error) {
	if job.GetDeliveryId() == "" || job.GetHookId() <= 0 || msgID == "" {
		return outbox.Message{}, fmt.Errorf("%w: webhook job without delivery id, hook id or message id", ErrInvalid)
	}
	b, err := proto.Marshal(job)
	if err != nil {
		return outbox.Message{}, fmt.Errorf("events: marshal webhook job %s: %w", job.GetDeliveryId(), err)
	}
	return outbox.Message{ID: msgID, Subject: WebhookSubject(job.GetHookId()), Data: b}, nil
}

// UnmarshalWebhookJob decodes a webhook job from a message body.
func UnmarshalWebhookJob(data []byte) (*eventsv1.WebhookJob, error) {
	job := &eventsv1.WebhookJob{}
	if err := proto.Unmarshal(data, job); err != nil {
		return nil, fmt.Errorf("events: unmarshal webhook job: %w", err)
	}
	return job, nil
}

func validateEnvelope(env *eventsv1.Envelope) error {
	if env == nil {
		return fmt.Errorf("%w: nil envelope", ErrInvalid)
	}
	if env.GetEventId() == "" {
		return fmt.Errorf("%w: envelope without event_id", ErrInvalid)
	}
	if !validTokens(env.GetType()) {
		return fmt.Errorf("%w: envelope %s: type %q is not a subject suffix", ErrInvalid, env.GetEventId(), env.GetType())
	}
	if t := TypeOf(env); t != "" && t != env.GetType() {
		return fmt.Errorf("%w: envelope %s: type %q but data of %q", ErrInvalid, env.GetEventId(), env.GetType(), t)
	}
	return nil
}

func validateMailJob(job *eventsv1.MailJob) error {
	if job == nil {
		return fmt.Errorf("%w: nil mail job", ErrInvalid)
	}
	if job.GetJobId() == "" {
		return fmt.Errorf("%w: mail job without job_id", ErrInvalid)
	}
	if !validTokens(job.GetKind()) {
		return fmt.Errorf("%w: mail job %s: kind %q is not a subject suffix", ErrInvalid, job.GetJobId(), job.GetKind())
	}
	return nil
}

// validTokens reports whether s is one or more dot-separated NATS subject tokens without
// wildcards or white space.
func validTokens(s string) bool {
	if s == "" {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
			return false
		}
	}
	return true
}
