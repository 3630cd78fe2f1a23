package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults and bounds of Options.
const (
	DefaultBatchSize = 500
	// MaxDeleteBatch is the most keys one S3 multi-object delete takes.
	MaxDeleteBatch = 1000
	// DefaultStaleUploadPrefix is where the gateway stores objects: packages/<id>/<file id>.
	DefaultStaleUploadPrefix = "packages/"
	// DefaultStepTimeout bounds one transaction or one storage request.
	DefaultStepTimeout = 30 * time.Second
	// DefaultOrphanGrace is how long an object key may stay reserved by an upload
	// without its file row before its object is removed (SHIPFILE_ORPHAN_GRACE).
	DefaultOrphanGrace = time.Hour
)

// Options tune an Expirer.
type Options struct {
	// Interval is the time between the starts of two ticks.
	Interval time.Duration
	// BatchSize is how many packages one transaction expires at most (default DefaultBatchSize).
	BatchSize int
	// DeleteBatchSize is how many queued objects one storage request removes at most
	// (default and maximum MaxDeleteBatch).
	DeleteBatchSize int
	// StaleUploadAge is the age after which an incomplete multipart upload is aborted;
	// 0 turns the sweep off.
	StaleUploadAge time.Duration
	// StaleUploadPrefix limits the sweep to the gateway's keys (default DefaultStaleUploadPrefix).
	StaleUploadPrefix string
	// StepTimeout bounds one transaction or storage request (default DefaultStepTimeout).
	StepTimeout time.Duration
	// OrphanGrace is the age after which a reserved object key without a file row is
	// an orphan whose object is removed (default DefaultOrphanGrace).
	OrphanGrace time.Duration
	// AuditRetention is the age after which audit log entries are removed
	// (SHIPFILE_AUDIT_RETENTION); 0 keeps them for ever.
	AuditRetention time.Duration
	// AuditCheckpoint is how often an audit.checkpoint event carries the audit chain's
	// head (one instance writes each); 0: never.
	AuditCheckpoint time.Duration
}

// Expirer expires overdue packages and removes the objects queued for deletion.
type Expirer struct {
	store   Store
	objects Objects
	metrics *Metrics
	log     *slog.Logger
	opts    Options
	now     func() time.Time
}

// New returns an expirer. metrics may be nil.
func New(store Store, objects Objects, metrics *Metrics, log *slog.Logger, opts Options) *Expirer {
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.DeleteBatchSize <= 0 || opts.DeleteBatchSize > MaxDeleteBatch {
		opts.DeleteBatchSize = MaxDeleteBatch
	}
	if opts.StaleUploadPrefix == "" {
		opts.StaleUploadPrefix = DefaultStaleUploadPrefix
	}
	if opts.StepTimeout <= 0 {
		opts.StepTimeout = DefaultStepTimeout
	}
	if opts.OrphanGrace <= 0 {
		opts.OrphanGrace = DefaultOrphanGrace
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Expirer{store: store, objects: objects, metrics: metrics, log: log, opts: opts, now: time.Now}
}

// Run ticks at once and then every Interval until ctx is cancelled, and returns nil
// then. A tick that is running when ctx is cancelled finishes the transaction it is in
// and stops; a tick that overruns the interval delays the next one.
func (e *Expirer) Run(ctx context.Context) error {
	t := time.NewTicker(e.opts.Interval)
	defer t.Stop()
	for {
		e.Tick(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// TickResult is what one tick did.
type TickResult struct {
	Expired          int   // packages expired
	Deleted          int   // queued objects removed
	DeletionFailures int   // queued objects whose removal failed (still queued)
	UploadsAborted   int   // stale multipart uploads aborted
	OrphansRemoved   int   // objects of uploads that never committed removed
	AuditRemoved     int   // audit entries past the retention removed
	AuditCheckpoints int   // audit.checkpoint events written (0 or 1)
	Err              error // the failures of the tick's steps, joined
}

// Tick expires every overdue package (batch after batch, until none is left that is
// not locked by another instance), removes the objects queued for deletion (until the
// queue is empty or storage fails) and the orphans (objects of uploads whose file row
// never committed within OrphanGrace), aborts stale multipart uploads, removes audit
// entries older than AuditRetention, and updates the gauges. A failing step does not stop the others.
func (e *Expirer) Tick(ctx context.Context) TickResult {
	start := time.Now()
	var r TickResult
	var errs []error
	if err := e.expire(ctx, &r); err != nil {
		errs = append(errs, err)
	}
	if err := e.sweep(ctx, &r); err != nil {
		errs = append(errs, err)
	}
	if err := e.sweepOrphans(ctx, &r); err != nil {
		errs = append(errs, err)
	}
	if err := e.abortStaleUploads(ctx, &r); err != nil {
		errs = append(errs, err)
	}
	if err := e.sweepAudit(ctx, &r); err != nil {
		errs = append(errs, err)
	}
	if err := e.checkpointAudit(ctx, &r); err != nil {
		errs = append(errs, err)
	}
	if err := e.measure(ctx); err != nil {
		errs = append(errs, err)
	}
	r.Err = errors.Join(errs...)

	outcome := OutcomeOK
	if r.Err != nil {
		outcome = OutcomeError
		if ctx.Err() == nil {
			e.log.Warn("expiry tick failed; the next tick tries again", "err", r.Err)
		}
	}
	if e.metrics != nil {
		e.metrics.Ticks.WithLabelValues(outcome).Inc()
		e.metrics.TickDuration.Observe(time.Since(start).Seconds())
	}
	if r.Expired > 0 || r.Deleted > 0 || r.DeletionFailures > 0 || r.UploadsAborted > 0 || r.OrphansRemoved > 0 || r.AuditRemoved > 0 {
		e.log.Info("expiry tick", "expired", r.Expired, "objects_deleted", r.Deleted,
			"object_deletion_failures", r.DeletionFailures, "stale_uploads_aborted", r.UploadsAborted,
			"orphans_removed", r.OrphansRemoved, "audit_entries_removed", r.AuditRemoved, "duration", time.Since(start))
	}
	return r
}

// step returns a context for one transaction: it outlives a cancelled ctx (so a batch
// in flight at shutdown commits rather than being thrown away) but no longer than
// StepTimeout.
func (e *Expirer) step(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), e.opts.StepTimeout)
}

func (e *Expirer) expire(ctx context.Context, r *TickResult) error {
	for ctx.Err() == nil {
		sctx, cancel := e.step(ctx)
		// One instant of the service's clock decides what is overdue and stamps the events.
		now := e.now()
		ps, err := e.store.ExpireDue(sctx, now, e.opts.BatchSize, func(ps []Package) (Effects, error) {
			return expiryEffects(ps, now), nil
		})
		cancel()
		if err != nil {
			return fmt.Errorf("expire packages: %w", err)
		}
		r.Expired += len(ps)
		if e.metrics != nil {
			e.metrics.PackagesExpired.Add(float64(len(ps)))
		}
		for _, p := range ps {
			e.log.Debug("package expired", "package_id", p.ID, "previous_state", p.PreviousState,
				"expires_at", p.ExpiresAt, "objects", len(p.ObjectKeys))
		}
		// Fewer than a batch: nothing overdue is left that another instance does not hold.
		if len(ps) < e.opts.BatchSize {
			return nil
		}
	}
	return nil
}

// sweep removes queued objects batch by batch. It stops at the first batch with a
// failure: what failed stays queued for the next tick, which tries again.
func (e *Expirer) sweep(ctx context.Context, r *TickResult) error {
	for ctx.Err() == nil {
		var removeErr error
		remove := func(keys []string) ([]string, error) {
			// Storage calls follow ctx: at shutdown the keys simply stay queued.
			rctx, cancel := context.WithTimeout(ctx, e.opts.StepTimeout)
			defer cancel()
			removed, err := e.objects.Remove(rctx, keys)
			removeErr = err
			return removed, err
		}
		sctx, cancel := e.step(ctx)
		locked, forgotten, err := e.store.SweepDeletions(sctx, e.opts.DeleteBatchSize, remove)
		cancel()
		r.Deleted += forgotten
		failed := 0
		if removeErr != nil {
			failed = locked - forgotten
		}
		r.DeletionFailures += failed
		if e.metrics != nil {
			e.metrics.ObjectsDeleted.Add(float64(forgotten))
			e.metrics.DeletionFailures.Add(float64(failed))
		}
		if err != nil {
			if removeErr != nil && errors.Is(err, removeErr) {
				return fmt.Errorf("delete objects (%d stay queued): %w", failed, err)
			}
			return fmt.Errorf("sweep object deletions: %w", err)
		}
		if locked < e.opts.DeleteBatchSize {
			return nil
		}
	}
	return nil
}

// sweepOrphans removes the objects of reservations older than OrphanGrace without a
// file row, batch by batch; it stops at the first batch with a failure (those keys stay
// reserved, and the next tick tries again).
func (e *Expirer) sweepOrphans(ctx context.Context, r *TickResult) error {
	for ctx.Err() == nil {
		remove := func(keys []string) ([]string, error) {
			rctx, cancel := context.WithTimeout(ctx, e.opts.StepTimeout)
			defer cancel()
			return e.objects.Remove(rctx, keys)
		}
		sctx, cancel := e.step(ctx)
		locked, removed, err := e.store.SweepOrphans(sctx, e.opts.OrphanGrace, e.opts.DeleteBatchSize, remove)
		cancel()
		r.OrphansRemoved += removed
		if e.metrics != nil {
			e.metrics.OrphansRemoved.Add(float64(removed))
		}
		if err != nil {
			return fmt.Errorf("remove orphan objects: %w", err)
		}
		if locked < e.opts.DeleteBatchSize {
			return nil
		}
	}
	return nil
}

// sweepAudit removes audit entries older than AuditRetention, batch by batch, from the
// front of the audit chain (the anchor's row lock takes instances in turn).
func (e *Expirer) sweepAudit(ctx context.Context, r *TickResult) error {
	if e.opts.AuditRetention <= 0 {
		return nil
	}
	for ctx.Err() == nil {
		sctx, cancel := e.step(ctx)
		n, err := e.store.RemoveOldAudit(sctx, e.opts.AuditRetention, e.opts.BatchSize)
		cancel()
		r.AuditRemoved += n
		if e.metrics != nil {
			e.metrics.AuditEntriesRemoved.Add(float64(n))
		}
		if err != nil {
			return fmt.Errorf("remove old audit entries: %w", err)
		}
		if n < e.opts.BatchSize {
			return nil
		}
	}
	return nil
}

// checkpointAudit writes an audit.checkpoint event when AuditCheckpoint has passed
// since the last one (written by this instance or another).
func (e *Expirer) checkpointAudit(ctx context.Context, r *TickResult) error {
	if e.opts.AuditCheckpoint <= 0 || ctx.Err() != nil {
		return nil
	}
	sctx, cancel := e.step(ctx)
	defer cancel()
	wrote, err := e.store.CheckpointAudit(sctx, e.opts.AuditCheckpoint, AuditCheckpoint)
	if err != nil {
		return fmt.Errorf("audit checkpoint: %w", err)
	}
	if wrote {
		r.AuditCheckpoints++
	}
	return nil
}

func (e *Expirer) abortStaleUploads(ctx context.Context, r *TickResult) error {
	if e.opts.StaleUploadAge <= 0 || ctx.Err() != nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, e.opts.StepTimeout)
	defer cancel()
	n, err := e.objects.AbortStaleUploads(sctx, e.opts.StaleUploadPrefix, e.now().Add(-e.opts.StaleUploadAge))
	r.UploadsAborted += n
	if e.metrics != nil {
		e.metrics.StaleUploadsAborted.Add(float64(n))
	}
	if err != nil {
		return fmt.Errorf("abort stale multipart uploads: %w", err)
	}
	return nil
}

// measure updates the lag and queue gauges.
func (e *Expirer) measure(ctx context.Context) error {
	if e.metrics == nil || ctx.Err() != nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, e.opts.StepTimeout)
	defer cancel()
	lag, err := e.store.OverdueLag(sctx, e.now())
	if err != nil {
		return fmt.Errorf("measure lag: %w", err)
	}
	pending, err := e.store.PendingDeletions(sctx)
	if err != nil {
		return fmt.Errorf("count queued object deletions: %w", err)
	}
	e.metrics.Lag.Set(lag.Seconds())
	e.metrics.PendingDeletions.Set(float64(pending))
	return nil
}
