package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/backoff"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/webhooks/internal/signing"
)

// Request headers of every webhook POST.
const (
	UserAgent = "Service-Webhook/1.0"

	HeaderEvent     = "X-Service-Event"
	HeaderSignature = "X-Service-Signature"
	HeaderHookID    = "X-Service-Hook-Id"
	HeaderDelivery  = "X-Service-Delivery"
	// Standard Webhooks headers (webhook-id, …; header names are case-insensitive).
	HeaderWebhookID        = "Webhook-Id"
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	HeaderWebhookSignature = "Webhook-Signature"
)

// Reasons recorded on deliveries and subscriptions.
const (
	ReasonSubscriptionDisabled = "subscription disabled"
	ReasonGone                 = "the receiver answered 410 Gone"
)

// recordTimeout bounds writing an attempt's outcome, which happens even when the
// handling context was cancelled while the request was under way.
const recordTimeout = 10 * time.Second

// Decision is the outcome of handling one job message: Ack (delivered, finally failed, or nothing to do), Nak
// (again after Delay) or Term (the message is malformed).
type Decision = events.Decision

// Actions on a job message.
const (
	Ack  = events.Ack
	Nak  = events.Nak
	Term = events.Term
)

// Request is one webhook POST.
type Request struct {
	URL    string
	Header http.Header
	Body   []byte
}

// Response is what came of a Request.
type Response struct {
	// StatusCode is the receiver's status, 0 when no response came (Err says why).
	StatusCode int
	Err        error
	Duration   time.Duration
	// Excerpt is the start of the response body, valid UTF-8.
	Excerpt string
	// RetryAfter is the response's Retry-After (seconds or HTTP date), 0 when absent.
	RetryAfter time.Duration
}

// Sender sends webhook requests.
type Sender interface {
	Send(ctx context.Context, req Request) Response
}

// DeliveryStore is what the delivery workers need of the database.
type DeliveryStore interface {
	// Delivery returns the delivery with its subscription, ErrNotFound when gone.
	Delivery(ctx context.Context, id string) (Delivery, error)
	// MarkFailed sets an unsucceeded delivery failed with reason, without an attempt.
	MarkFailed(ctx context.Context, id, reason string) error
	// RecordAttempt writes rec in one transaction and returns the attempt's number;
	// ErrNotFound when the delivery is gone.
	RecordAttempt(ctx context.Context, rec AttemptRecord) (int, error)
	// OldestPending returns the age of the oldest pending delivery, 0 when none is.
	OldestPending(ctx context.Context) (time.Duration, error)
}

// DeliveryOptions tune a Deliverer.
type DeliveryOptions struct {
	// Schedule holds the waits after attempts 1, 2, …; a round has len(Schedule)+1 attempts.
	Schedule []time.Duration
	// MaxInFlightPerHook caps the attempts in flight per subscription in this instance
	// (0: no cap).
	MaxInFlightPerHook int
	// BusyDelay is how long a job waits when its subscription's cap is reached (default 1s).
	BusyDelay time.Duration
	// DisableAfter: a subscription failing since longer than this is disabled at its
	// next failed attempt (0: never).
	DisableAfter time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Deliverer handles delivery jobs: one signed attempt per job message.
type Deliverer struct {
	store   DeliveryStore
	sender  Sender
	opts    DeliveryOptions
	limiter *hookLimiter
	metrics *Metrics
	log     *slog.Logger
}

// NewDeliverer returns a Deliverer.
func NewDeliverer(store DeliveryStore, sender Sender, metrics *Metrics, log *slog.Logger, opts DeliveryOptions) *Deliverer {
	if opts.BusyDelay <= 0 {
		opts.BusyDelay = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Deliverer{
		store:   store,
		sender:  sender,
		opts:    opts,
		limiter: newHookLimiter(opts.MaxInFlightPerHook),
		metrics: metrics,
		log:     log,
	}
}

// MaxRoundAttempts is the number of attempts of a round: the schedule's waits plus one.
func (d *Deliverer) MaxRoundAttempts() int { return len(d.opts.Schedule) + 1 }

// OldestPending returns the age of the oldest pending delivery.
func (d *Deliverer) OldestPending(ctx context.Context) (time.Duration, error) {
	return d.store.OldestPending(ctx)
}

// Deliver handles one job message (an encoded eventsv1.WebhookJob) that JetStream has
// delivered numDelivered times. When ctx is cancelled during the request (shutdown),
// the attempt is abandoned unrecorded and the job goes back to the queue at once.
func (d *Deliverer) Deliver(ctx context.Context, data []byte, numDelivered uint64) Decision {
	job, err := events.UnmarshalWebhookJob(data)
	if err != nil {
		return Decision{Action: Term, Reason: err.Error()}
	}
	if _, err := uuid.Parse(job.GetDeliveryId()); err != nil {
		return Decision{Action: Term, Reason: fmt.Sprintf("webhook job with delivery id %q: %v", job.GetDeliveryId(), err)}
	}
	log := d.log.With("delivery_id", job.GetDeliveryId(), "hook_id", job.GetHookId())

	del, err := d.store.Delivery(ctx, job.GetDeliveryId())
	switch {
	case errors.Is(err, ErrNotFound):
		log.Info("delivery gone (subscription or delivery deleted); job dropped")
		return Decision{Action: Ack}
	case err != nil && ctx.Err() != nil:
		return Decision{Action: Nak} // stopping: another instance takes it at once
	case err != nil:
		log.Warn("load delivery", "err", err)
		return Decision{Action: Nak, Delay: backoff.TransientDelay(numDelivered)}
	}
	log = log.With("event", del.Event)
	switch {
	case del.Status == StatusSucceeded:
		log.Info("delivery already succeeded; duplicate job dropped")
		return Decision{Action: Ack}
	case del.Status == StatusFailed && del.RoundAttempts > 0:
		// A finished round; a redelivery through the gateway starts a new one (round 0).
		log.Info("delivery already failed; duplicate job dropped")
		return Decision{Action: Ack}
	}
	if !del.Subscription.Active && del.Event != events.TypeWebhookTest {
		if err := d.store.MarkFailed(ctx, del.ID, ReasonSubscriptionDisabled); err != nil && !errors.Is(err, ErrNotFound) {
			log.Warn("mark delivery failed", "err", err)
			return Decision{Action: Nak, Delay: backoff.TransientDelay(numDelivered)}
		}
		log.Info("subscription disabled; delivery failed without an attempt")
		d.metrics.Deliveries.WithLabelValues(OutcomeFailed).Inc()
		return Decision{Action: Ack}
	}
	if !d.limiter.tryAcquire(del.SubscriptionID) {
		return Decision{Action: Nak, Delay: d.opts.BusyDelay}
	}
	defer d.limiter.release(del.SubscriptionID)

	now := d.opts.Now()
	resp := d.sender.Send(ctx, Request{
		URL:    del.Subscription.URL,
		Header: Headers(del, now),
		Body:   del.Body,
	})
	if resp.StatusCode == 0 && ctx.Err() != nil {
		log.Info("attempt abandoned at shutdown; job requeued")
		return Decision{Action: Nak}
	}
	d.metrics.AttemptDuration.Observe(resp.Duration.Seconds())
	return d.record(ctx, log, del, resp, numDelivered)
}

// record decides the attempt's consequences and writes them.
func (d *Deliverer) record(ctx context.Context, log *slog.Logger, del Delivery, resp Response, numDelivered uint64) Decision {
	rec := AttemptRecord{
		DeliveryID:     del.ID,
		SubscriptionID: del.SubscriptionID,
		StatusCode:     resp.StatusCode,
		Duration:       resp.Duration,
		Excerpt:        resp.Excerpt,
		HasResponse:    resp.StatusCode != 0,
	}
	round := del.RoundAttempts + 1
	outcome := OutcomeRetried
	var wait time.Duration
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		rec.Succeeded, rec.Status, outcome = true, StatusSucceeded, OutcomeSucceeded
	case code == http.StatusGone:
		rec.Error = failureText(resp)
		rec.Status, rec.DisableReason, outcome = StatusFailed, ReasonGone, OutcomeDisabled
	default:
		rec.Error = failureText(resp)
		sub := del.Subscription
		if d.opts.DisableAfter > 0 && sub.Active && !sub.FailingSince.IsZero() && d.opts.Now().Sub(sub.FailingSince) >= d.opts.DisableAfter {
			rec.Status, outcome = StatusFailed, OutcomeDisabled
			rec.DisableReason = "every delivery failed for " + humanDuration(d.opts.DisableAfter)
			break
		}
		w, more := backoff.RetryWait(d.opts.Schedule, round)
		if !more {
			rec.Status, outcome = StatusFailed, OutcomeFailed
			break
		}
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			w = max(w, resp.RetryAfter)
		}
		rec.Status, wait = StatusPending, w
	}

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	attempt, err := d.store.RecordAttempt(rctx, rec)
	if errors.Is(err, ErrNotFound) {
		log.Info("delivery deleted during its attempt; job dropped")
		return Decision{Action: Ack}
	}
	if err != nil {
		// The attempt happened but is not on record: the job comes back and tries again.
		log.Warn("record attempt", "err", err, "status_code", resp.StatusCode)
		return Decision{Action: Nak, Delay: backoff.TransientDelay(numDelivered)}
	}
	d.metrics.Deliveries.WithLabelValues(outcome).Inc()

	attrs := []any{"attempt", attempt, "round_attempt", round, "status_code", resp.StatusCode,
		"duration_ms", resp.Duration.Milliseconds(), "outcome", outcome}
	if rec.Error != "" {
		attrs = append(attrs, "error", rec.Error)
	}
	switch {
	case rec.DisableReason != "":
		log.Warn("webhook attempt failed; subscription disabled", append(attrs, "reason", rec.DisableReason)...)
	case rec.Status == StatusPending:
		log.Info("webhook attempt failed; will retry", append(attrs, "retry_in", wait.String())...)
		return Decision{Action: Nak, Delay: wait}
	case rec.Status == StatusFailed:
		log.Warn("webhook attempt failed; delivery failed after the last attempt", attrs...)
	default:
		log.Info("webhook delivered", attrs...)
	}
	return Decision{Action: Ack}
}

// failureText says why an attempt failed, for the attempt log and the delivery.
func failureText(resp Response) string {
	switch {
	case resp.StatusCode == 0 && resp.Err != nil:
		return resp.Err.Error()
	case resp.StatusCode == 0:
		return "no response"
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return fmt.Sprintf("the receiver answered %d %s; redirects are not followed", resp.StatusCode, http.StatusText(resp.StatusCode))
	default:
		return fmt.Sprintf("the receiver answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
}

// Headers returns the headers of an attempt of del sent at now: the seed's headers
// (X-Service-Signature keyed by the current secret only), X-Service-Delivery and the
// Standard Webhooks headers, whose signature also uses the previous secret while a
// rotation's grace period runs.
func Headers(del Delivery, now time.Time) http.Header {
	sub := del.Subscription
	ts := now.Unix()
	secrets := []string{sub.Secret}
	if sub.PreviousSecret != "" && sub.PreviousSecretUntil.After(now) {
		secrets = append(secrets, sub.PreviousSecret)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", UserAgent)
	h.Set(HeaderEvent, del.Event)
	h.Set(HeaderSignature, signing.Service(sub.Secret, del.Body))
	h.Set(HeaderHookID, strconv.FormatInt(del.SubscriptionID, 10))
	h.Set(HeaderDelivery, del.ID)
	h.Set(HeaderWebhookID, del.ID)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderWebhookSignature, signing.StandardHeader(del.ID, ts, del.Body, secrets...))
	return h
}
