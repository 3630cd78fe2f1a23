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
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/groupcommit"
	"github.com/shipfile/shipfile/pkg/msgerr"
)

// Request headers of every webhook POST.
const (
	UserAgent = "Service-Webhook/1.0"

	HeaderEvent     = "X-Service-Event"
	HeaderSignature = "X-Service-Signature"
	HeaderHookID    = "X-Service-Hook-Id"
	HeaderDelivery  = "X-Service-Delivery"
	// HeaderSequence is the event's number among its package's events (1, 2, …, in
	// the order they happened), on every delivery of a package's event.
	HeaderSequence = "X-Service-Sequence"
	// Standard Webhooks headers (webhook-id, …; header names are case-insensitive).
	HeaderWebhookID        = "Webhook-Id"
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	HeaderWebhookSignature = "Webhook-Signature"
)

// Reasons recorded on deliveries and subscriptions.
const (
	ReasonSubscriptionDisabled = "subscription disabled"
	ReasonGone                 = "the receiver answered 410 Gone"
	// ReasonOrderReleased ends the error of an ordered delivery's last attempt: its
	// package's next event goes now.
	ReasonOrderReleased = "failed for good: the next event of its package is released"
)

// recordTimeout bounds writing an attempt's outcome, which happens even when the
// handling context was cancelled while the request was under way.
const recordTimeout = 10 * time.Second

// errAbandoned: the dispatcher stopped while the attempt was under way.
var errAbandoned = errors.New("attempt abandoned at shutdown")

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
	// Deliveries returns the deliveries with these ids that exist, by id.
	Deliveries(ctx context.Context, ids []string) (map[string]Delivery, error)
	// MarkFailed sets an unsucceeded delivery failed with reason, without an attempt,
	// writing its row if it has none yet; ErrNotFound when it had succeeded.
	MarkFailed(ctx context.Context, d Delivery, reason string) error
	// RecordAttempts writes the attempts in one transaction (a group commit), each
	// delivery's row with its first attempt, moves the packages of the FinishOrder
	// records on, and returns each one's number (and release) by delivery id.
	RecordAttempts(ctx context.Context, recs []AttemptRecord) (map[string]Recorded, error)
	// DisableSubscription disables an active subscription with reason.
	DisableSubscription(ctx context.Context, id int64, reason string) error
	// OldestPending returns the age of the oldest pending delivery, 0 when none is.
	OldestPending(ctx context.Context) (time.Duration, error)
}

// DeliveryOptions tune a Deliverer.
type DeliveryOptions struct {
	// Schedule holds the waits after attempts 1, 2, …; a round has len(Schedule)+1 attempts.
	Schedule []time.Duration
	// Batch is the most deliveries one load or one group commit takes (default 256).
	Batch int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Order keeps the deliveries of ordered subscriptions in their packages' order;
	// nil: every delivery goes as it comes.
	Order *Order
	// Journal keeps the attempts that end a delivery at its first try until the store
	// has them (AttemptJournal); nil: every attempt waits for the store's commit.
	Journal AttemptJournal
}

// Deliverer handles delivery jobs: one signed attempt per job message. Loading
// deliveries and recording attempts are batched across the jobs under way: a few
// statements serve many jobs.
type Deliverer struct {
	store   DeliveryStore
	subs    *Subscriptions
	rates   *RateLimiter
	sender  Sender
	opts    DeliveryOptions
	loads   *groupcommit.Committer[string, loaded]
	records *groupcommit.Committer[AttemptRecord, recorded]
	metrics *Metrics
	log     *slog.Logger
}

type loaded struct {
	d  Delivery
	ok bool
}

type recorded struct {
	attempt  int
	released string
	ok       bool
}

// loadRunners is how many loads of delivery rows may run at once per instance.
const loadRunners = 4

// recordRunners is how many group commits of attempts may run at once per instance,
// and recordSpill when a second one may start: commits take turns, so attempts that end
// while one runs go together into the next, the batches grow with the load and the
// commits do not contend for PostgreSQL's WAL (four at once made batches a quarter of
// the size, and PostgreSQL spent about twice the CPU per delivery, its backends queueing
// on LWLock:WALWrite). A commit that has run for recordSpill (a lock, a slow disk, a
// checkpoint) no longer holds up the others: the next starts beside it, up to
// recordRunners. (Strictly one at a time, such a stall would hold every attempt of the
// instance, and its slots of max_in_flight, for its whole length.)
const (
	recordRunners = 4
	recordSpill   = 20 * time.Millisecond
)

// NewDeliverer returns a Deliverer; Close stops its batchers.
func NewDeliverer(store DeliveryStore, subs *Subscriptions, rates *RateLimiter, sender Sender, metrics *Metrics, log *slog.Logger, opts DeliveryOptions) *Deliverer {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Batch <= 0 {
		opts.Batch = 256
	}
	d := &Deliverer{store: store, subs: subs, rates: rates, sender: sender, opts: opts, metrics: metrics, log: log}
	d.loads = groupcommit.New(groupcommit.Options{Runners: loadRunners, Max: opts.Batch, Timeout: recordTimeout}, func(ctx context.Context, ids []string) ([]loaded, error) {
		m, err := store.Deliveries(ctx, ids)
		if err != nil {
			return nil, err
		}
		out := make([]loaded, len(ids))
		for i, id := range ids {
			out[i].d, out[i].ok = m[id]
		}
		return out, nil
	})
	d.records = groupcommit.New(groupcommit.Options{Runners: recordRunners, Max: opts.Batch, Spill: recordSpill, Timeout: recordTimeout}, func(ctx context.Context, recs []AttemptRecord) ([]recorded, error) {
		m, err := store.RecordAttempts(ctx, recs)
		if err != nil {
			return nil, err
		}
		out := make([]recorded, len(recs))
		for i, r := range recs {
			rec, ok := m[r.DeliveryID]
			out[i].attempt, out[i].released, out[i].ok = rec.Attempt, rec.Released, ok
		}
		return out, nil
	})
	return d
}

// Close stops the batchers; call it once no Deliver runs any more.
func (d *Deliverer) Close() {
	d.loads.Close()
	d.records.Close()
}

// MaxRoundAttempts is the number of attempts of a round: the schedule's waits plus one.
func (d *Deliverer) MaxRoundAttempts() int { return len(d.opts.Schedule) + 1 }

// OldestPending returns the age of the oldest pending delivery.
func (d *Deliverer) OldestPending(ctx context.Context) (time.Duration, error) {
	return d.store.OldestPending(ctx)
}

// Deliver handles one job message (an encoded eventsv1.WebhookJob) that JetStream has
// delivered numDelivered times. The job may be acknowledged once Deliver returns nil:
// its attempt is committed (or nothing is left to do). A msgerr.RetryAfter says when to
// handle it again (its attempt failed and the next one waits for the schedule, or a
// dependency failed: the database, the subscription's secret); a msgerr.Poison, that
// it never can be. When ctx is cancelled during the request (shutdown), the attempt is
// abandoned unrecorded and the job goes back to the queue at once (a msgerr.RetryAfter
// without delay).
func (d *Deliverer) Deliver(ctx context.Context, data []byte, numDelivered uint64) error {
	job, err := events.UnmarshalWebhookJob(data)
	if err != nil {
		return msgerr.Poison(err)
	}
	return d.DeliverJob(ctx, job, numDelivered, false)
}

// DeliverJob is Deliver of a decoded job: a due job's, or the one EventJobs made of an
// event. seenBefore says that a first attempt's job may have been attempted already
// though JetStream hands it out for the first time (an old event handed to a consumer
// that was created again): its row is read first, like a job handed out again.
//
// A delivery of an ordered subscription's package event waits (nil: its row holds it)
// while an earlier event of its package is not done; once it is done, delivered or
// failed for good, the next one of its package is released (Order).
func (d *Deliverer) DeliverJob(ctx context.Context, job *eventsv1.WebhookJob, numDelivered uint64, seenBefore bool) error {
	del, end, od, err := d.deliverJob(ctx, job, numDelivered, seenBefore)
	if err != nil || end == endOpen || d.opts.Order == nil || del.PackageSeq == 0 {
		return err
	}
	if od.done {
		// Its package was moved on in the attempt's commit.
		d.opts.Order.Released(ctx, del, od.released, end == endFailed)
		return nil
	}
	if del.Subscription.ID == 0 {
		// Done before its subscription was read (a duplicate job).
		if del.Subscription, err = d.subs.Get(ctx, del.SubscriptionID); err != nil {
			return nil // gone: nothing waits for it
		}
	}
	if !d.opts.Order.Applies(del.Subscription, del) {
		return nil
	}
	if err := d.opts.Order.Finish(context.WithoutCancel(ctx), del, end == endFailed); err != nil {
		d.log.Warn("ordered delivery done; releasing the next of its package failed", "delivery_id", del.ID, "hook_id", del.SubscriptionID, "err", err)
		return msgerr.RetryAfter(backoff.TransientDelay(numDelivered), err)
	}
	return nil
}

// orderDone says that an attempt's commit moved its package on (an ordered delivery
// done) and which delivery it released ("" when none waits yet).
type orderDone struct {
	done     bool
	released string
}

// deliveryEnd says whether a delivery job left its delivery done.
type deliveryEnd int

const (
	endOpen   deliveryEnd = iota // not done (waiting, to be retried) or nothing to do
	endDone                      // delivered
	endFailed                    // failed for good
)

// deliverJob is DeliverJob up to the delivery's end: it returns the delivery and
// whether the job left it done.
func (d *Deliverer) deliverJob(ctx context.Context, job *eventsv1.WebhookJob, numDelivered uint64, seenBefore bool) (Delivery, deliveryEnd, orderDone, error) {
	if _, err := uuid.Parse(job.GetDeliveryId()); err != nil {
		return Delivery{}, endOpen, orderDone{}, msgerr.Poison(fmt.Errorf("webhook job with delivery id %q: %w", job.GetDeliveryId(), err))
	}
	log := &deliveryLog{base: d.log, id: job.GetDeliveryId(), hook: job.GetHookId()}

	del, fresh := jobDelivery(job)
	// rowless: the delivery has no row yet (its first attempt's job, the row not read or
	// not found).
	rowless := fresh
	if !fresh || numDelivered != 1 || seenBefore {
		// Handed out again, a retry or a redelivery: the row says what is left to do.
		// A first attempt's job whose delivery has no row yet (no attempt committed: a
		// dispatcher killed mid-attempt) is still in its first round.
		l, err := d.loads.Do(ctx, job.GetDeliveryId())
		switch {
		case err != nil && ctx.Err() != nil:
			return del, endOpen, orderDone{}, msgerr.RetryAfter(0, err) // stopping: another instance takes it at once
		case err != nil:
			log.get().Warn("load delivery", "err", err)
			return del, endOpen, orderDone{}, msgerr.RetryAfter(backoff.TransientDelay(numDelivered), err)
		case !l.ok && !fresh:
			log.get().Info("delivery gone (subscription or delivery deleted); job dropped")
			return del, endOpen, orderDone{}, nil
		case l.ok:
			del, rowless = l.d, false
			if dup := duplicateJob(del); dup != "" {
				log.get().Info(dup+"; duplicate job dropped", "event", del.Event)
				if del.Status == StatusSucceeded {
					return del, endDone, orderDone{}, nil
				}
				return del, endFailed, orderDone{}, nil
			}
		}
	}
	log.event = del.Event
	sub, err := d.subs.Get(ctx, del.SubscriptionID)
	switch {
	case errors.Is(err, ErrNotFound):
		log.get().Info("subscription deleted; job dropped")
		return del, endOpen, orderDone{}, nil
	case err != nil && ctx.Err() != nil:
		return del, endOpen, orderDone{}, msgerr.RetryAfter(0, err)
	case err != nil:
		log.get().Warn("load subscription", "err", err)
		return del, endOpen, orderDone{}, msgerr.RetryAfter(backoff.TransientDelay(numDelivered), err)
	}
	del.Subscription = sub
	if fresh && d.opts.Order.Applies(sub, del) {
		// An event's delivery on an ordered subscription: it goes only when it is its
		// package's next (a retry or a release is, already).
		decision, err := d.opts.Order.Gate(ctx, del)
		switch {
		case err != nil && ctx.Err() != nil:
			return del, endOpen, orderDone{}, msgerr.RetryAfter(0, err)
		case err != nil:
			log.get().Warn("ordered delivery", "err", err)
			return del, endOpen, orderDone{}, msgerr.RetryAfter(backoff.TransientDelay(numDelivered), err)
		case decision == GateWait:
			log.get().Debug("ordered delivery waits for an earlier event of its package", "package_seq", del.PackageSeq)
			return del, endOpen, orderDone{}, nil
		}
	}
	if sub.SecretError != nil {
		log.get().Error("cannot open the subscription's signing secret; delivery waits", "err", sub.SecretError)
		return del, endOpen, orderDone{}, msgerr.RetryAfter(backoff.TransientDelay(numDelivered), sub.SecretError)
	}
	if failsWithoutAttempt(sub, del.Event) {
		if err := d.store.MarkFailed(ctx, del, ReasonSubscriptionDisabled); err != nil && !errors.Is(err, ErrNotFound) {
			log.get().Warn("mark delivery failed", "err", err)
			return del, endOpen, orderDone{}, msgerr.RetryAfter(backoff.TransientDelay(numDelivered), err)
		}
		log.get().Info("subscription disabled; delivery failed without an attempt")
		d.metrics.Deliveries.WithLabelValues(OutcomeFailed).Inc()
		return del, endFailed, orderDone{}, nil
	}
	if d.rates != nil {
		if err := d.rates.Wait(ctx, sub); err != nil {
			return del, endOpen, orderDone{}, msgerr.RetryAfter(0, err)
		}
	}

	now := d.opts.Now()
	resp := d.sender.Send(ctx, Request{
		URL:    sub.URL,
		Header: Headers(del, now),
		Body:   del.Body,
	})
	if resp.StatusCode == 0 && ctx.Err() != nil {
		log.get().Info("attempt abandoned at shutdown; job requeued")
		return del, endOpen, orderDone{}, msgerr.RetryAfter(0, errAbandoned)
	}
	d.metrics.AttemptDuration.Observe(resp.Duration.Seconds())
	end, od, err := d.record(ctx, log, del, resp, numDelivered, rowless)
	return del, end, od, err
}

// record decides the attempt's consequences and writes them, and says whether the
// delivery is done.
func (d *Deliverer) record(ctx context.Context, log *deliveryLog, del Delivery, resp Response, numDelivered uint64, rowless bool) (deliveryEnd, orderDone, error) {
	rec := AttemptRecord{
		DeliveryID:     del.ID,
		SubscriptionID: del.SubscriptionID,
		EventID:        del.EventID,
		Event:          del.Event,
		Body:           del.Body,
		CreatedAt:      del.CreatedAt,
		PackageID:      del.PackageID,
		PackageSeq:     del.PackageSeq,
		StatusCode:     resp.StatusCode,
		Duration:       resp.Duration,
		Excerpt:        resp.Excerpt,
		HasResponse:    resp.StatusCode != 0,
	}
	round := del.RoundAttempts + 1
	o := DecideAttempt(resp, round, d.opts.Schedule)
	rec.Succeeded, rec.Status, rec.DisableReason, rec.Error = o.Status == StatusSucceeded, o.Status, o.DisableReason, o.Error
	outcome, wait := o.Outcome, o.Wait
	if rec.Status != StatusPending && d.opts.Order.Applies(del.Subscription, del) {
		rec.FinishOrder = true
		if rec.Status == StatusFailed {
			// The delivery log says what its end does to the package's later events.
			rec.Error += "; " + ReasonOrderReleased
		}
	}

	// Written even when ctx is cancelled (shutdown): the attempt happened. (The group
	// commit bounds itself by recordTimeout and answers every caller.)
	rctx := context.WithoutCancel(ctx)
	if rec.DisableReason != "" {
		// Rare (410 Gone): a write to the subscription's row, which tells every
		// instance. Before the attempt's record, so a failure here retries both.
		dctx, cancel := context.WithTimeout(rctx, recordTimeout)
		err := d.store.DisableSubscription(dctx, del.SubscriptionID, rec.DisableReason)
		if err == nil {
			d.subs.Changed(dctx, del.SubscriptionID)
		}
		cancel()
		if err != nil {
			log.get().Warn("disable subscription", "err", err)
			return endOpen, orderDone{}, msgerr.RetryAfter(backoff.TransientDelay(numDelivered), err)
		}
	}
	var r recorded
	var err error
	journal := d.opts.Journal != nil && journaled(rec, rowless)
	if journal {
		r = recorded{attempt: 1, ok: true}
		if err = d.opts.Journal.Append(rctx, rec); errors.Is(err, ErrNotJournaled) {
			journal = false
		}
	}
	if !journal {
		r, err = d.records.Do(rctx, rec)
	}
	if err == nil && !r.ok {
		log.get().Info("delivery deleted during its attempt; job dropped")
		return endOpen, orderDone{}, nil
	}
	if err != nil {
		// The attempt happened but is not on record: the job comes back and tries again.
		log.get().Warn("record attempt", "err", err, "status_code", resp.StatusCode)
		return endOpen, orderDone{}, msgerr.RetryAfter(backoff.TransientDelay(numDelivered), err)
	}
	d.metrics.Deliveries.WithLabelValues(outcome).Inc()

	attrs := func(more ...any) []any {
		a := []any{"attempt", r.attempt, "round_attempt", round, "status_code", resp.StatusCode,
			"duration_ms", resp.Duration.Milliseconds(), "outcome", outcome}
		if rec.Error != "" {
			a = append(a, "error", rec.Error)
		}
		return append(a, more...)
	}
	switch {
	case rec.DisableReason != "":
		log.get().Warn("webhook attempt failed; subscription disabled", attrs("reason", rec.DisableReason)...)
	case rec.Status == StatusPending:
		log.get().Info("webhook attempt failed; will retry", attrs("retry_in", wait.String())...)
		return endOpen, orderDone{}, msgerr.RetryAfter(wait, errors.New(rec.Error))
	case rec.Status == StatusFailed:
		log.get().Warn("webhook attempt failed; delivery failed after the last attempt", attrs()...)
	case d.log.Enabled(ctx, slog.LevelDebug):
		log.get().Debug("webhook delivered", attrs()...)
	}
	od := orderDone{done: rec.FinishOrder, released: r.released}
	if rec.Status == StatusFailed {
		return endFailed, od, nil
	}
	return endDone, od, nil
}

// deliveryLog is the logger of one delivery, made only when something is logged (most
// deliveries log nothing, and a logger with attributes costs allocations).
type deliveryLog struct {
	base  *slog.Logger
	id    string
	hook  int64
	event string
}

func (l *deliveryLog) get() *slog.Logger {
	args := []any{"delivery_id", l.id, "hook_id", l.hook}
	if l.event != "" {
		args = append(args, "event", l.event)
	}
	return l.base.With(args...)
}

// jobDelivery returns the delivery a first attempt's job describes (ok false for any
// other job: a retry or a redelivery through the API carries the ids only). Such a job,
// made of an event by EventJobs (or queued by the fan-out of versions before the one
// hop), carries everything its row needs: its delivery is pending in its first round
// with no attempt yet, until an attempt is committed, which writes the row. A job of a
// dispatcher before that (no event id: its fan-out wrote the row) reads the row.
func jobDelivery(job *eventsv1.WebhookJob) (Delivery, bool) {
	if job.GetEvent() == "" || job.GetEventId() == "" {
		return Delivery{}, false
	}
	d := Delivery{
		ID: job.GetDeliveryId(), SubscriptionID: job.GetHookId(), EventID: job.GetEventId(),
		Event: job.GetEvent(), Body: job.GetBody(), Status: StatusPending,
		PackageID: job.GetPackageId(), PackageSeq: job.GetPackageSeq(),
	}
	if ms := job.GetCreatedAtUnixMs(); ms > 0 {
		d.CreatedAt = time.UnixMilli(ms)
	}
	return d, true
}

// duplicateJob says why a job for del has nothing left to do ("" when it has): the
// delivery already succeeded, or its round already failed (a redelivery through the
// gateway starts a new round, at round attempt 0).
func duplicateJob(del Delivery) string {
	switch {
	case del.Status == StatusSucceeded:
		return "delivery already succeeded"
	case del.Status == StatusFailed && del.RoundAttempts > 0:
		return "delivery already failed"
	}
	return ""
}

// failsWithoutAttempt reports whether a delivery of event to sub fails at once, with
// no attempt: the subscription is disabled and the event is not webhook.test (a test
// delivery reaches a disabled subscription too, so its owner can check it).
func failsWithoutAttempt(sub Subscription, event string) bool {
	return !sub.Active && event != events.TypeWebhookTest
}

// AttemptOutcome is what one attempt's response makes of its delivery.
type AttemptOutcome struct {
	// Status is the delivery's status after the attempt: StatusSucceeded,
	// StatusPending (another attempt after Wait) or StatusFailed.
	Status string
	// Outcome is the attempt's label on shipfile_webhook_deliveries_total.
	Outcome string
	// DisableReason, when not empty, disables the subscription.
	DisableReason string
	// Error says why the attempt failed ("" when it succeeded).
	Error string
	// Wait is the wait before the next attempt when Status is StatusPending.
	Wait time.Duration
}

// DecideAttempt applies the delivery rules to the response of attempt round (1-based,
// counted in the delivery's current round) under schedule (the waits after attempts
// 1, 2, …): 2xx succeeds; 410 Gone fails the delivery and disables the subscription;
// anything else (no response, 3xx, 4xx, 5xx) waits schedule[round-1] ± jitter, at least
// the Retry-After of a 429 or 503, and fails the delivery after the last attempt
// (len(schedule)+1 attempts a round), whatever Retry-After said.
func DecideAttempt(resp Response, round int, schedule []time.Duration) AttemptOutcome {
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return AttemptOutcome{Status: StatusSucceeded, Outcome: OutcomeSucceeded}
	case code == http.StatusGone:
		return AttemptOutcome{Status: StatusFailed, Outcome: OutcomeDisabled, DisableReason: ReasonGone, Error: failureText(resp)}
	default:
		o := AttemptOutcome{Status: StatusFailed, Outcome: OutcomeFailed, Error: failureText(resp)}
		w, more := backoff.RetryWait(schedule, round)
		if !more {
			return o
		}
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			w = max(w, resp.RetryAfter)
		}
		o.Status, o.Outcome, o.Wait = StatusPending, OutcomeRetried, w
		return o
	}
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

// Headers returns the headers of an attempt of del sent at now (docs/WEBHOOKS.md, "What a
// delivery carries"): X-Service-Event, X-Service-Hook-Id, X-Service-Signature (keyed by
// the current secret only), X-Service-Delivery, X-Service-Sequence for a package's event,
// and the Standard Webhooks headers, whose signature also uses the previous secret while
// a rotation's grace period runs.
func Headers(del Delivery, now time.Time) http.Header {
	sub := del.Subscription
	ts := now.Unix()
	sg := sub.signers
	if sg == nil || sg.current == nil {
		sg = withSigners(sub).signers
	}
	sig := sg.current.Standard(del.ID, ts, del.Body)
	if sub.PreviousSecret != "" && sub.PreviousSecretUntil.After(now) && sg.previous != nil {
		sig += " " + sg.previous.Standard(del.ID, ts, del.Body)
	}
	// One map and one backing array for the nine values (an attempt's headers are built
	// for every delivery); the keys are already canonical.
	v := [...]string{
		"application/json", UserAgent, del.Event, sg.current.Service(del.Body),
		strconv.FormatInt(del.SubscriptionID, 10), del.ID, del.ID, strconv.FormatInt(ts, 10), sig,
	}
	h := make(http.Header, len(v)+1)
	for i, k := range [...]string{"Content-Type", "User-Agent", HeaderEvent, HeaderSignature, HeaderHookID,
		HeaderDelivery, HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature} {
		h[k] = v[i : i+1 : i+1]
	}
	if del.PackageSeq > 0 {
		h[HeaderSequence] = []string{strconv.FormatUint(del.PackageSeq, 10)}
	}
	return h
}
