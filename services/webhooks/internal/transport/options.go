package transport

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// Production names of the durable consumers.
const (
	// FanoutConsumer is the consumer of package events of the versions that queued a
	// job per delivery (before the one hop). Run deletes it once every subscription has
	// its own consumer of the events, which start where it had got to.
	FanoutConsumer = "webhooks-fanout"
	// DeliverConsumer names the delivery consumers: one per subscription on
	// SHIPFILE_EVENTS, DeliverConsumer + "-" + its id, taking the subscription's events
	// and its due jobs. (The versions before the one hop had them on SHIPFILE_WEBHOOKS;
	// Run deletes those.)
	DeliverConsumer = "webhooks-deliver"
	// RetryConsumer holds the jobs waiting for their next attempt.
	RetryConsumer = "webhooks-retry"
	// JournalConsumer writes the attempt journal into the database (journal.go).
	JournalConsumer = "webhooks-journal"
	// QueuedConsumer moves the jobs queued on a subscription's subject of
	// SHIPFILE_WEBHOOKS (redeliveries asked through the API, and the jobs the fan-out
	// of earlier versions queued) to its due subject.
	QueuedConsumer = "webhooks-queued"
)

// HeaderNotBefore is the header of a job waiting on the retry subject: Unix
// milliseconds before which its next attempt must not start.
const HeaderNotBefore = "Shipfile-Not-Before"

// Options name the streams, subjects and consumers the dispatcher uses and tune its
// loops. DefaultOptions has the production names; tests give each run its own.
type Options struct {
	EventsStream string // SHIPFILE_EVENTS
	// EventsFilter is the subjects of every package event (shipfile.events.>): a
	// subscription's type t is on strings.TrimSuffix(EventsFilter, ">") + t.
	EventsFilter string
	// DueSubjectPrefix starts the subject of a subscription's due jobs on EventsStream
	// (shipfile.webhook-due., then the hook id).
	DueSubjectPrefix string
	FanoutConsumer   string // webhooks-fanout: deleted once the per-subscription consumers exist

	JobsStream       string // SHIPFILE_WEBHOOKS
	JobSubjectPrefix string // shipfile.webhooks. (then the hook id): redeliveries asked through the API
	DeliverConsumer  string // webhooks-deliver (then "-" and the hook id)
	// RetrySubjectPrefix starts the subjects of jobs waiting for their next attempt
	// (then the hook id); default JobSubjectPrefix + "retry.".
	RetrySubjectPrefix string
	RetryConsumer      string // webhooks-retry
	QueuedConsumer     string // webhooks-queued
	JournalConsumer    string // webhooks-journal: the attempt journal, on JournalSubject()

	// AckWait of the delivery consumers: longer than one attempt (timeout + margin).
	// A handler also reports progress every AckWait/2. A killed instance's slots of a
	// subscription's max_in_flight come back after AckWait.
	AckWait time.Duration
	// MaxAckPending of the retry consumer: jobs waiting for their next attempt, across
	// all instances (default 100000; when reached, new retries wait).
	MaxAckPending int
	// Workers caps the attempts in flight in this instance, all subscriptions together
	// (default 256); each subscription also has its own cap (max_in_flight).
	Workers int
	// FetchWait is how long one fetch waits for messages; also the longest a stopping
	// dispatcher waits for its fetches (default 2s).
	FetchWait time.Duration
	// ShutdownTimeout is how long in-flight work may finish once Run's context is done;
	// then attempts are abandoned and their messages go back to the queue (default 20s).
	ShutdownTimeout time.Duration
	// StatsInterval is the refresh period of the queue gauges (default 5s).
	StatsInterval time.Duration
	// ReconcileInterval is how often the delivery consumers are checked against the
	// subscriptions without a pushed change (default 30s).
	ReconcileInterval time.Duration
	// FreshFor is how long after it was stored an event is taken to be handed out for
	// the first time when JetStream says so (default 10m): an older one (a backlog, or a
	// subscription's consumer created again, which starts at the subscription's
	// creation) has its delivery's row read before the attempt, so a delivery that
	// succeeded is not sent again.
	FreshFor time.Duration
	// Metrics of the consumer runtime, shared by the process's consumers; nil: none.
	Metrics *consumer.Metrics
}

// DefaultOptions returns the production names and defaults.
func DefaultOptions() Options {
	return Options{
		EventsStream:      events.StreamEvents,
		EventsFilter:      events.SubjectPrefix + ">",
		DueSubjectPrefix:  events.WebhookDueSubjectPrefix,
		FanoutConsumer:    FanoutConsumer,
		JobsStream:        events.StreamWebhooks,
		JobSubjectPrefix:  events.WebhookSubjectPrefix,
		DeliverConsumer:   DeliverConsumer,
		RetryConsumer:     RetryConsumer,
		QueuedConsumer:    QueuedConsumer,
		JournalConsumer:   JournalConsumer,
		AckWait:           15 * time.Second,
		MaxAckPending:     100000,
		Workers:           256,
		FetchWait:         2 * time.Second,
		ShutdownTimeout:   20 * time.Second,
		StatsInterval:     5 * time.Second,
		ReconcileInterval: 30 * time.Second,
		FreshFor:          10 * time.Minute,
	}
}

func (o *Options) defaults() {
	d := DefaultOptions()
	set := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	set(&o.EventsStream, d.EventsStream)
	set(&o.EventsFilter, d.EventsFilter)
	set(&o.DueSubjectPrefix, d.DueSubjectPrefix)
	set(&o.FanoutConsumer, d.FanoutConsumer)
	set(&o.JobsStream, d.JobsStream)
	set(&o.JobSubjectPrefix, d.JobSubjectPrefix)
	set(&o.DeliverConsumer, d.DeliverConsumer)
	set(&o.RetrySubjectPrefix, o.JobSubjectPrefix+"retry.")
	set(&o.RetryConsumer, d.RetryConsumer)
	set(&o.QueuedConsumer, d.QueuedConsumer)
	set(&o.JournalConsumer, d.JournalConsumer)
	pos := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	pos(&o.AckWait, d.AckWait)
	pos(&o.FetchWait, d.FetchWait)
	pos(&o.ShutdownTimeout, d.ShutdownTimeout)
	pos(&o.StatsInterval, d.StatsInterval)
	pos(&o.ReconcileInterval, d.ReconcileInterval)
	pos(&o.FreshFor, d.FreshFor)
	if o.MaxAckPending <= 0 {
		o.MaxAckPending = d.MaxAckPending
	}
	if o.Workers <= 0 {
		o.Workers = d.Workers
	}
}

// HookConsumer is the name of the delivery consumer of subscription id.
func (o Options) HookConsumer(id int64) string {
	return o.DeliverConsumer + "-" + strconv.FormatInt(id, 10)
}

// JournalSubject is the attempt journal's subject on JobsStream (two tokens after
// JobSubjectPrefix, so no subscription's subject and no retry subject matches it).
func (o Options) JournalSubject() string { return o.JobSubjectPrefix + "journal.attempts" }

// DueSubject is the subject of subscription id's due jobs on EventsStream.
func (o Options) DueSubject(id int64) string {
	return o.DueSubjectPrefix + strconv.FormatInt(id, 10)
}

// HookFilters are the subjects the delivery consumer of s takes: the events it selects
// (every event when it selects all or is ordered), webhook.test (a test goes to its one subscription,
// whatever it selects) and its due jobs.
func (o Options) HookFilters(s app.Subscription) []string {
	if s.Events == nil || s.Ordered() {
		// An ordered subscription also passes over the events it does not take, so that
		// its packages' later events do not wait for them.
		return []string{o.EventsFilter, o.DueSubject(s.ID)}
	}
	prefix := strings.TrimSuffix(o.EventsFilter, ">")
	subjects := []string{prefix + events.TypeWebhookTest}
	for _, t := range s.Events {
		subjects = append(subjects, prefix+t)
	}
	slices.Sort(subjects)
	return append(slices.Compact(subjects), o.DueSubject(s.ID))
}
