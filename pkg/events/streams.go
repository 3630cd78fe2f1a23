package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/bus"
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

// EventsStream is the configuration of SHIPFILE_EVENTS: subjects shipfile.events.>
// (package events) and shipfile.webhook-due.> (webhook delivery jobs that are due), file
// storage, limits retention (messages stay for DefaultEventsMaxAge whoever consumed
// them) and the duplicate window.
func EventsStream() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamEvents,
		Description: "shipfile package events (eventsv1.Envelope) and due webhook delivery jobs (eventsv1.WebhookJob)",
		Subjects:    []string{SubjectPrefix + ">", WebhookDueSubjectPrefix + ">"},
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
// shipfile.webhooks.>, file storage, work-queue retention (a job is removed once the
// dispatcher acknowledges it: moved to its due subject) and the duplicate window.
func WebhooksStream() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamWebhooks,
		Description: "shipfile webhook delivery jobs waiting to be due (eventsv1.WebhookJob) and the dispatcher's attempt journal",
		Subjects:    []string{WebhookSubjectPrefix + ">"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardOld,
		Duplicates:  DuplicateWindow,
		Replicas:    1,
	}
}

// StreamOption adjusts the configuration of the streams EnsureStreams creates or
// updates.
type StreamOption func(*jetstream.StreamConfig)

// WithReplicas makes JetStream keep n copies of each stream (SHIPFILE_STREAM_REPLICAS):
// 1 on a single server, 3 on a three-node cluster. The stream's consumers follow it.
func WithReplicas(n int) StreamOption {
	return func(cfg *jetstream.StreamConfig) { cfg.Replicas = n }
}

// Streams returns the configurations of SHIPFILE_EVENTS, SHIPFILE_MAIL and
// SHIPFILE_WEBHOOKS with opts applied.
func Streams(opts ...StreamOption) []jetstream.StreamConfig {
	cfgs := []jetstream.StreamConfig{EventsStream(), MailStream(), WebhooksStream()}
	for i := range cfgs {
		for _, o := range opts {
			o(&cfgs[i])
		}
	}
	return cfgs
}

// EnsureStreams creates SHIPFILE_EVENTS, SHIPFILE_MAIL and SHIPFILE_WEBHOOKS, or updates
// them to the current configuration (with opts applied). Every service calls it at
// start; several at once is safe, and whichever comes first creates the streams. Every
// instance must be given the same options, or each start undoes the previous one's.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, opts ...StreamOption) error {
	return EnsureStream(ctx, js, Streams(opts...)...)
}

// maxReplicas is the most replicas JetStream keeps of a stream.
const maxReplicas = 5

// errCodeClusterNoPeers is the server's JSClusterNoPeersErrF, "no suitable peers for
// placement" (nats.go names no constant for it).
const errCodeClusterNoPeers jetstream.ErrorCode = 10005

// Retries of EnsureStream: each request gets ensureAttemptTimeout, and a stream gets at
// most ensureAttempts requests, with waits doubling from ensureFirstWait to
// ensureMaxWait between them.
const (
	ensureAttempts       = 8
	ensureAttemptTimeout = 5 * time.Second
	ensureFirstWait      = 100 * time.Millisecond
	ensureMaxWait        = 2 * time.Second
)

// EnsureStream creates or updates each stream in cfgs (CreateOrUpdateStream). Several
// callers at once all succeed: one racing another's creation retries (as an update).
// Changing the replicas of an existing stream is an update like any other: the servers
// add or drop copies (more than one needs a clustered JetStream).
//
// A request that gets no answer is retried: a clustered server (NATS 2.9 at least)
// drops a stream request that races the same stream's creation, and one sent during a
// leader election may go unanswered too.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfgs ...jetstream.StreamConfig) error {
	for _, cfg := range cfgs {
		if cfg.Replicas < 0 || cfg.Replicas > maxReplicas {
			return fmt.Errorf("events: stream %s: %d replicas, want 1 to %d", cfg.Name, cfg.Replicas, maxReplicas)
		}
		if err := ensureOne(ctx, js, cfg); err != nil {
			return fmt.Errorf("events: ensure stream %s (%d replicas): %w", cfg.Name, max(cfg.Replicas, 1), err)
		}
	}
	return nil
}

// errCodeSubjectOverlap is the server's JSStreamSubjectOverlapErr, "subjects overlap
// with an existing stream" (nats.go names no constant for it).
const errCodeSubjectOverlap jetstream.ErrorCode = 10065

func ensureOne(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	return retryRequest(ctx, func(actx context.Context) error {
		_, err := js.CreateOrUpdateStream(actx, cfg)
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeSubjectOverlap && racingCreation(actx, js, cfg) {
			return fmt.Errorf("%w (%w)", jetstream.ErrStreamNameAlreadyInUse, err)
		}
		return err
	})
}

// racingCreation tells, after a "subjects overlap" answer, whether it came from another
// caller's creation of the same stream, which a clustered server answers this way too:
// the stream of that name exists, or no other stream holds its subjects (the racing
// creation is not visible yet on the server asked). The next attempt then updates it.
// When another stream holds a subject, no retry fixes it.
func racingCreation(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) bool {
	if _, err := js.Stream(ctx, cfg.Name); err == nil {
		return true
	}
	for _, subject := range cfg.Subjects {
		if name, err := js.StreamNameBySubject(ctx, subject); err == nil && name != cfg.Name {
			return false
		}
	}
	return true
}

// EnsureConsumer creates or updates the durable consumer cfg on stream, with the same
// retries as EnsureStream: instances of a service starting at once all create the one
// shared consumer, and a clustered server may drop a racing request or one sent during a
// leader election.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	var cons jetstream.Consumer
	err := retryRequest(ctx, func(actx context.Context) error {
		var err error
		cons, err = js.CreateOrUpdateConsumer(actx, stream, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("events: consumer %s on %s: %w", cfg.Durable, stream, err)
	}
	return cons, nil
}

// retryRequest sends a JetStream API request (req, given a per-attempt context) until it
// succeeds, fails for a reason a retry cannot fix, or ensureAttempts are spent.
func retryRequest(ctx context.Context, req func(context.Context) error) error {
	wait := ensureFirstWait
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, ensureAttemptTimeout)
		err := req(actx)
		cancel()
		if err == nil || attempt == ensureAttempts || ctx.Err() != nil || !retryable(err) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, ensureMaxWait)
	}
}

// retryable reports whether a stream or consumer request may succeed if sent again: it went
// unanswered, lost a creation race, or met a JetStream cluster that is electing a leader
// or has not yet seen enough servers for the stream's replicas.
func retryable(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrStreamNameAlreadyInUse):
		return true
	case errors.As(err, &apiErr):
		// "No suitable peers for placement": fewer servers are up and known to the
		// meta leader than the stream has replicas, as while a cluster starts or a
		// server restarts. After the last attempt the error stays: the cluster is
		// too small.
		if apiErr.ErrorCode == errCodeClusterNoPeers {
			return true
		}
		// 503: "JetStream system temporarily unavailable" while a cluster elects its
		// meta leader. (JetStream not enabled at all is 503 too, but never answers
		// AccountInfo, which bus.Connect checks first.)
		return apiErr.Code == 503 && !errors.Is(err, jetstream.ErrJetStreamNotEnabled)
	}
	return false
}

// Connect connects to NATS as cfg says (bus.Connect) and creates or updates the streams
// with cfg's replicas (EnsureStreams). Every service starts with it, so none can set the
// streams back to another number of replicas than the others.
func Connect(ctx context.Context, cfg bus.Config, name string) (*bus.Conn, error) {
	nc, err := bus.Connect(ctx, cfg.URL, name)
	if err != nil {
		return nil, err
	}
	if err := EnsureStreams(ctx, nc.JS, WithReplicas(cfg.StreamReplicas)); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}
