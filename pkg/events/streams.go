package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream settings.
const (
	// DuplicateWindow is how long both streams remember a Nats-Msg-Id and drop a second
	// message with it: longer than the outbox relay takes to mark a published row.
	DuplicateWindow = 2 * time.Minute
	// DefaultEventsMaxAge is how long SHIPFILE_EVENTS keeps an event: consumers that
	// were down for less than that catch up.
	DefaultEventsMaxAge = 30 * 24 * time.Hour
)

// EventsStream is the configuration of SHIPFILE_EVENTS: subjects shipfile.events.>,
// file storage, limits retention (events stay for DefaultEventsMaxAge whoever consumed
// them) and the duplicate window. Only fields NATS server 2.9 knows are set.
func EventsStream() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamEvents,
		Description: "shipfile package events (eventsv1.Envelope)",
		Subjects:    []string{SubjectPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardOld,
		MaxAge:      DefaultEventsMaxAge,
		Duplicates:  DuplicateWindow,
		Replicas:    1,
	}
}

// MailStream is the configuration of SHIPFILE_MAIL: subjects shipfile.mail.>, file
// storage, work-queue retention (a job is removed once a consumer acknowledges it; jobs
// have no age limit, so none is lost while the mailer is down) and the duplicate window.
func MailStream() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamMail,
		Description: "shipfile mail jobs (eventsv1.MailJob); payloads carry magic links",
		Subjects:    []string{MailSubjectPrefix + ">"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardOld,
		Duplicates:  DuplicateWindow,
		Replicas:    1,
	}
}

// WebhooksStream is the configuration of SHIPFILE_WEBHOOKS: subjects
// shipfile.webhooks.<hook id>, file storage, work-queue retention (a job is removed once
// the dispatcher acknowledges it: delivered, or finally failed) and the duplicate window.
func WebhooksStream() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamWebhooks,
		Description: "shipfile webhook delivery jobs (eventsv1.WebhookJob)",
		Subjects:    []string{WebhookSubjectPrefix + ">"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardOld,
		Duplicates:  DuplicateWindow,
		Replicas:    1,
	}
}

// EnsureStreams creates SHIPFILE_EVENTS, SHIPFILE_MAIL and SHIPFILE_WEBHOOKS, or updates
// them to the current configuration. Every service calls it at start; several at once
// is safe.
func EnsureStreams(ctx context.Context, js jetstream.JetStream) error {
	return EnsureStream(ctx, js, EventsStream(), MailStream(), WebhooksStream())
}

// EnsureStream creates or updates each stream in cfgs (CreateOrUpdateStream). Two
// callers racing to create one stream both succeed: the loser of the race retries as an
// update.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfgs ...jetstream.StreamConfig) error {
	for _, cfg := range cfgs {
		var err error
		for range 3 {
			_, err = js.CreateOrUpdateStream(ctx, cfg)
			// Update found no stream, create found one made meanwhile: try again.
			if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("events: ensure stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}
