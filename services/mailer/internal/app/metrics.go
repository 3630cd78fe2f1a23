package app

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a mail job message, the outcome label of shipfile_mailer_jobs_total.
const (
	OutcomeSent      = "sent"      // the SMTP server accepted the e-mail
	OutcomeRetried   = "retried"   // a transient failure; the job comes back after the schedule's wait
	OutcomeFailed    = "failed"    // rejected for good (5xx), undeliverable, or out of retries
	OutcomeDuplicate = "duplicate" // the job was already sent or failed: nothing sent
	OutcomePoison    = "poison"    // the message is not a usable mail job: terminated
)

// Metrics are the mailer's Prometheus metrics.
type Metrics struct {
	// Jobs counts handled job messages by outcome.
	Jobs *prometheus.CounterVec
	// SendDuration observes each SMTP attempt, connect to the server's last reply.
	SendDuration prometheus.Histogram
	// QueueDepth is the consumer's pending plus unacknowledged jobs.
	QueueDepth prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shipfile_mailer_jobs_total",
			Help: "Mail job messages handled, by outcome (sent, retried, failed, duplicate, poison).",
		}, []string{"outcome"}),
		SendDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shipfile_mailer_send_duration_seconds",
			Help:    "Duration of SMTP send attempts (connect to the server's last reply), successful or not.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		QueueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shipfile_mailer_queue_depth",
			Help: "Mail jobs waiting, in flight or waiting for their retry (the consumer's pending plus ack-pending messages).",
		}),
	}
	for _, o := range []string{OutcomeSent, OutcomeRetried, OutcomeFailed, OutcomeDuplicate, OutcomePoison} {
		m.Jobs.WithLabelValues(o)
	}
	for _, c := range []prometheus.Collector{m.Jobs, m.SendDuration, m.QueueDepth} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
