package app

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a delivery job, the outcome label of shipfile_webhook_deliveries_total.
const (
	OutcomeSucceeded = "succeeded" // the receiver answered 2xx
	OutcomeRetried   = "retried"   // the attempt failed; the job comes back after the schedule's wait
	OutcomeFailed    = "failed"    // the delivery finally failed (schedule exhausted, subscription disabled)
	OutcomeDisabled  = "disabled"  // the attempt disabled the subscription (410 Gone, failing too long)
)

// Metrics are the dispatcher's Prometheus metrics.
type Metrics struct {
	// Deliveries counts handled delivery jobs by outcome.
	Deliveries *prometheus.CounterVec
	// AttemptDuration observes the duration of each HTTP attempt.
	AttemptDuration prometheus.Histogram
	// QueueDepth is the deliveries waiting or in flight: the subscriptions' delivery
	// consumers' pending plus unacknowledged messages, and the redeliveries not yet moved
	// to them.
	QueueDepth prometheus.Gauge
	// OldestPending is the age of the oldest pending delivery, in seconds.
	OldestPending prometheus.Gauge
	// LogRemoved counts the attempts and deliveries past SHIPFILE_WEBHOOK_LOG_RETENTION
	// this instance removed, by kind.
	LogRemoved *prometheus.CounterVec
	// OrderForgotten counts the places of finished packages this instance removed from
	// the order of ordered subscriptions (Order.ForgetDone).
	OrderForgotten prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shipfile_webhook_deliveries_total",
			Help: "Webhook delivery jobs handled, by outcome (succeeded, retried, failed, disabled).",
		}, []string{"outcome"}),
		AttemptDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shipfile_webhook_attempt_duration_seconds",
			Help:    "Duration of webhook delivery attempts (request sent to response read).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		QueueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shipfile_webhook_queue_depth",
			Help: "Webhook deliveries waiting or in flight (the subscriptions' delivery consumers' pending plus ack-pending messages, and redeliveries not yet moved to them).",
		}),
		OldestPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shipfile_webhook_oldest_pending_seconds",
			Help: "Age of the oldest webhook delivery still pending, 0 when none is.",
		}),
		LogRemoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shipfile_webhook_log_removed_total",
			Help: "Webhook attempts and deliveries older than SHIPFILE_WEBHOOK_LOG_RETENTION that this instance removed, by kind (attempts, deliveries).",
		}, []string{"kind"}),
		OrderForgotten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_webhook_order_places_removed_total",
			Help: "Places of packages with nothing left to do that this instance removed from the order of ordered webhook subscriptions.",
		}),
	}
	m.LogRemoved.WithLabelValues(LogAttempts)
	m.LogRemoved.WithLabelValues(LogDeliveries)
	for _, o := range []string{OutcomeSucceeded, OutcomeRetried, OutcomeFailed, OutcomeDisabled} {
		m.Deliveries.WithLabelValues(o)
	}
	for _, c := range []prometheus.Collector{m.Deliveries, m.AttemptDuration, m.QueueDepth, m.OldestPending, m.LogRemoved, m.OrderForgotten} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
