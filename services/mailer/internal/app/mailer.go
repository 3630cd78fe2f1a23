package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shipfile/shipfile/pkg/backoff"
	"github.com/shipfile/shipfile/pkg/clip"
	"github.com/shipfile/shipfile/pkg/msgerr"
)

// maxErrorLen bounds the error text kept in mail_deliveries and the audit log.
const maxErrorLen = 1000

// Store is what the mailer needs of the database.
type Store interface {
	// Attempt locks job's record, creating it (pending, no attempts) at first sight, and
	// calls fn with it; then it writes fn's Outcome (and its audit entry) and commits. The
	// lock is held while fn runs, so no two instances attempt one job at once: Attempt
	// returns ErrBusy without calling fn when another holds it. fn's Outcome is written
	// even when ctx is cancelled while fn runs.
	Attempt(ctx context.Context, job Job, fn func(Delivery) Outcome) error
}

// Sender sends e-mails.
type Sender interface {
	// Send sends e and returns its Message-ID once the server accepted it. A *Rejection
	// error is a permanent refusal; any other error is transient.
	Send(ctx context.Context, e Email) (messageID string, err error)
}

// Options tune a Mailer.
type Options struct {
	// Schedule holds the waits after failed attempts 1, 2, …; a job gets
	// len(Schedule)+1 attempts.
	Schedule []time.Duration
	// BusyDelay is how long a job waits when another instance is sending it (default 5s).
	BusyDelay time.Duration
}

// Mailer handles mail jobs: at most one attempt per job message.
type Mailer struct {
	store   Store
	sender  Sender
	metrics *Metrics
	log     *slog.Logger
	opts    Options
}

// NewMailer returns a Mailer.
func NewMailer(store Store, sender Sender, metrics *Metrics, log *slog.Logger, opts Options) *Mailer {
	if opts.BusyDelay <= 0 {
		opts.BusyDelay = 5 * time.Second
	}
	return &Mailer{store: store, sender: sender, metrics: metrics, log: log, opts: opts}
}

// MaxAttempts is the number of attempts a job gets: the schedule's waits plus one.
func (m *Mailer) MaxAttempts() int { return len(m.opts.Schedule) + 1 }

// outcome label for an attempt abandoned at shutdown (not counted).
const abandoned = "abandoned"

// Handle handles one job message (an encoded eventsv1.MailJob) that JetStream has
// delivered numDelivered times, and says what to do with the message.
//
// A job already sent or failed is acknowledged without sending: a redelivered job costs
// no second e-mail. A job whose package is no longer active (revoked, expired, deleted
// before the e-mail could go out) fails without sending. Otherwise the e-mail is sent while the job's record is locked, and
// the outcome is recorded before the message is settled: sent (acknowledged, audit
// mail.sent), rejected for good by a 5xx reply or out of retries (acknowledged, audit
// mail.failed), or a transient failure (returned after the schedule's next wait).
//
// It returns nil when the message is done (sent, finally failed, or already handled), a
// msgerr.Poison when the message is malformed, and a msgerr.RetryAfter when it is to be
// handled again (the transport turns these into Ack, Term and NakWithDelay).
func (m *Mailer) Handle(ctx context.Context, data []byte, numDelivered uint64) error {
	job, err := ParseJob(data)
	if err != nil {
		m.metrics.Jobs.WithLabelValues(OutcomePoison).Inc()
		return msgerr.Poison(err)
	}
	log := m.log.With("job_id", job.ID, "package_id", job.PackageID, "kind", job.Kind)
	email, renderErr := Render(job)
	if renderErr != nil && !errors.Is(renderErr, errUndeliverable) {
		m.metrics.Jobs.WithLabelValues(OutcomePoison).Inc()
		return msgerr.Poison(renderErr)
	}
	recipient := OneLine(job.RecipientEmail)

	var (
		result    string
		sent      bool
		wait      time.Duration
		attempt   int
		lastError string
		took      time.Duration
		messageID string
	)
	err = m.store.Attempt(ctx, job, func(d Delivery) Outcome {
		if d.State == StateSent || d.State == StateFailed {
			result = OutcomeDuplicate
			return Outcome{}
		}
		attempt = d.Attempts + 1
		if d.PackageState != "active" {
			// Revoked, expired or deleted since it was finalized (a retry hours later):
			// its link is dead, an e-mail would only confuse the recipient.
			why := "the package was deleted"
			if d.PackageState != "" {
				why = "the package is " + d.PackageState
			}
			result, lastError = OutcomeFailed, "not sent: "+why
			return Outcome{State: StateFailed, Error: lastError, AuditAction: ActionFailed,
				AuditDetail: truncate(fmt.Sprintf("to %s: %s", recipient, lastError))}
		}
		if renderErr != nil {
			result, lastError = OutcomeFailed, renderErr.Error()
			return Outcome{State: StateFailed, Error: lastError, AuditAction: ActionFailed,
				AuditDetail: truncate(fmt.Sprintf("to %s: not sent: %s", recipient, lastError))}
		}
		start := time.Now()
		id, err := m.sender.Send(ctx, email)
		took = time.Since(start)
		var rej *Rejection
		isRejection := errors.As(err, &rej)
		if err != nil && !isRejection && ctx.Err() != nil {
			result = abandoned
			return Outcome{}
		}
		m.metrics.SendDuration.Observe(took.Seconds())
		if err == nil {
			sent, result, messageID = true, OutcomeSent, id
			return Outcome{State: StateSent, Attempted: true, MessageID: id,
				AuditAction: ActionSent, AuditDetail: truncate("to " + recipient)}
		}
		lastError = truncate(err.Error())
		if isRejection {
			result = OutcomeFailed
			return Outcome{State: StateFailed, Attempted: true, Error: lastError, AuditAction: ActionFailed,
				AuditDetail: truncate(fmt.Sprintf("to %s: %s", recipient, rej.Text()))}
		}
		w, more := backoff.RetryWait(m.opts.Schedule, attempt)
		if !more {
			result = OutcomeFailed
			return Outcome{State: StateFailed, Attempted: true, Error: lastError, AuditAction: ActionFailed,
				AuditDetail: truncate(fmt.Sprintf("to %s: gave up after %d attempts: %s", recipient, attempt, lastError))}
		}
		result, wait = OutcomeRetried, w
		return Outcome{State: StatePending, Attempted: true, Error: lastError}
	})
	switch {
	case errors.Is(err, ErrBusy):
		log.Info("job is being sent by another instance; trying again later", "retry_in", m.opts.BusyDelay.String())
		return msgerr.RetryAfter(m.opts.BusyDelay, nil)
	case err != nil && sent:
		// The server has the e-mail but the record is lost: the job comes back and is
		// sent again. The one way to a duplicate, and only when PostgreSQL fails here.
		log.Error("e-mail sent but not recorded; the job will be sent again", "err", err, "message_id", messageID)
		return msgerr.RetryAfter(backoff.TransientDelay(numDelivered), nil)
	case err != nil && ctx.Err() != nil:
		return msgerr.RetryAfter(0, nil) // stopping: another instance takes it at once
	case err != nil:
		log.Warn("mail job not handled; it will be tried again", "err", err)
		return msgerr.RetryAfter(backoff.TransientDelay(numDelivered), nil)
	}

	attrs := []any{"attempt", attempt, "duration_ms", took.Milliseconds()}
	switch result {
	case abandoned:
		log.Info("send abandoned at shutdown; job requeued")
		return msgerr.RetryAfter(0, nil)
	case OutcomeDuplicate:
		log.Info("job already handled; duplicate dropped")
	case OutcomeSent:
		log.Info("e-mail sent", append(attrs, "message_id", messageID)...)
	case OutcomeRetried:
		log.Warn("send failed; will retry", append(attrs, "error", lastError, "retry_in", wait.String())...)
	case OutcomeFailed:
		log.Warn("e-mail not sent; job failed for good", append(attrs, "error", lastError)...)
	}
	m.metrics.Jobs.WithLabelValues(result).Inc()
	if result == OutcomeRetried {
		return msgerr.RetryAfter(wait, nil)
	}
	return nil
}

// truncate shortens an error or audit detail to what its column keeps.
func truncate(s string) string { return clip.Marked(s, maxErrorLen) }
