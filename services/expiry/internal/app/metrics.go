package app

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a tick, the outcome label of shipfile_expiry_ticks_total.
const (
	OutcomeOK    = "ok"    // every step ran (objects that could not be deleted stay queued and are counted apart)
	OutcomeError = "error" // a step failed (the database, typically); the next tick tries again
)

// Metrics are the expiry service's Prometheus metrics.
type Metrics struct {
	// PackagesExpired counts packages this instance expired.
	PackagesExpired prometheus.Counter
	// ObjectsDeleted counts queued objects this instance removed from storage.
	ObjectsDeleted prometheus.Counter
	// DeletionFailures counts object removals that failed (they stay queued).
	DeletionFailures prometheus.Counter
	// PendingDeletions is the number of objects queued for deletion after the last tick.
	PendingDeletions prometheus.Gauge
	// Lag is the age of the oldest overdue package not yet expired after the last tick.
	Lag prometheus.Gauge
	// StaleUploadsAborted counts incomplete multipart uploads this instance aborted.
	StaleUploadsAborted prometheus.Counter
	// OrphansRemoved counts objects of uploads that never committed that this instance removed.
	OrphansRemoved prometheus.Counter
	// AuditEntriesRemoved counts audit entries past SHIPFILE_AUDIT_RETENTION this
	// instance removed.
	AuditEntriesRemoved prometheus.Counter
	// Ticks counts ticks by outcome.
	Ticks *prometheus.CounterVec
	// TickDuration observes how long each tick took.
	TickDuration prometheus.Histogram
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		PackagesExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_expiry_packages_expired_total",
			Help: "Packages expired by this instance.",
		}),
		ObjectsDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_expiry_objects_deleted_total",
			Help: "Objects queued for deletion (of expired packages, deleted packages and removed files) that this instance removed from storage.",
		}),
		DeletionFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_expiry_object_deletion_failures_total",
			Help: "Object removals that failed; the objects stay queued and are tried again next tick.",
		}),
		PendingDeletions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shipfile_expiry_object_deletions_pending",
			Help: "Objects queued for deletion, measured after each tick.",
		}),
		Lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shipfile_expiry_lag_seconds",
			Help: "Age of the oldest package whose expires_at has passed and that is not expired yet, measured after each tick (0 when none).",
		}),
		StaleUploadsAborted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_expiry_stale_uploads_aborted_total",
			Help: "Incomplete multipart uploads older than SHIPFILE_EXPIRY_STALE_UPLOAD_AGE that this instance aborted.",
		}),
		OrphansRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_expiry_orphan_objects_removed_total",
			Help: "Objects of uploads whose file row never committed (a crash, a failed insert), reserved longer than SHIPFILE_ORPHAN_GRACE ago, that this instance removed.",
		}),
		AuditEntriesRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_expiry_audit_entries_removed_total",
			Help: "Audit log entries older than SHIPFILE_AUDIT_RETENTION that this instance removed.",
		}),
		Ticks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shipfile_expiry_ticks_total",
			Help: "Expiry ticks run by this instance, by outcome (ok, error).",
		}, []string{"outcome"}),
		TickDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shipfile_expiry_tick_duration_seconds",
			Help:    "Duration of expiry ticks (expire, delete objects, abort stale uploads).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
	}
	m.Ticks.WithLabelValues(OutcomeOK)
	m.Ticks.WithLabelValues(OutcomeError)
	for _, c := range []prometheus.Collector{m.PackagesExpired, m.ObjectsDeleted, m.DeletionFailures, m.PendingDeletions,
		m.Lag, m.StaleUploadsAborted, m.OrphansRemoved, m.AuditEntriesRemoved, m.Ticks, m.TickDuration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
