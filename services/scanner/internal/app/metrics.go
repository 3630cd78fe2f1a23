package app

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the scanner's Prometheus metrics.
type Metrics struct {
	// Files counts verdicts recorded by this instance, by scan state.
	Files *prometheus.CounterVec
	// Bytes counts the bytes streamed to clamd in completed scans.
	Bytes prometheus.Counter
	// ScanSeconds observes how long one file's scan took (object read and clamd).
	ScanSeconds prometheus.Histogram
	// InFlight is the files being scanned now.
	InFlight prometheus.Gauge
	// ClamdUnavailable counts scans that could not reach clamd (retried later).
	ClamdUnavailable prometheus.Counter
	// Deferred counts files handed back because their package held its share of the
	// scan slots (Slots).
	Deferred prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Files: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shipfile_scanner_files_total",
			Help: "Scan verdicts recorded by this instance, by scan state (clean, infected, unscannable, error).",
		}, []string{"scan"}),
		Bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_scanner_bytes_total",
			Help: "Bytes streamed to clamd in completed scans.",
		}),
		ScanSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shipfile_scanner_scan_seconds",
			Help:    "Time to scan one file (object read and clamd INSTREAM).",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 9),
		}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shipfile_scanner_scans_in_flight",
			Help: "Files being scanned by this instance now.",
		}),
		ClamdUnavailable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_scanner_clamd_unavailable_total",
			Help: "Scans that could not reach clamd (the file is tried again later).",
		}),
		Deferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_scanner_deferred_total",
			Help: "Files handed back for a moment because their package held its share of the scan slots while others waited.",
		}),
	}
	for _, c := range []prometheus.Collector{m.Files, m.Bytes, m.ScanSeconds, m.InFlight, m.ClamdUnavailable, m.Deferred} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
