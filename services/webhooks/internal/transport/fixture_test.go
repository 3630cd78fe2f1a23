package transport_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventstest"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

// fixture is one test's database and streams.
type fixture struct {
	pool    *pgxpool.Pool
	js      jetstream.JetStream
	streams webhooktest.Streams
}

func setup(t *testing.T) fixture {
	t.Helper()
	t.Parallel()
	pool, _ := schematest.Pool(t)
	js := eventstest.Connect(t)
	return fixture{pool: pool, js: js, streams: webhooktest.NewStreams(t, js)}
}

// start runs a dispatcher on the fixture that may reach the test's loopback receivers.
func (f fixture) start(t *testing.T, cfg webhooktest.Config) *webhooktest.Instance {
	t.Helper()
	cfg.Pool, cfg.JS, cfg.Streams = f.pool, f.js, f.streams
	if !cfg.AllowPrivate {
		cfg.AllowPrivate = true
	}
	return webhooktest.Start(t, cfg)
}

func (f fixture) subscribe(t *testing.T, rc *webhooktest.Receiver, mod func(*webhooktest.Subscription)) int64 {
	t.Helper()
	s := webhooktest.Subscription{URL: rc.URL, Secret: rc.Secret}
	if mod != nil {
		mod(&s)
	}
	return webhooktest.InsertSubscription(t, f.pool, s)
}

// keepPublishing publishes a package.created event every 20 ms until the returned
// stop is called; stop returns once the publisher has ended.
func (f fixture) keepPublishing(t *testing.T) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageCreated, 0))
		}
	}()
	return func() { close(quit); <-done }
}

func answers(codes ...int) webhooktest.Respond {
	return func(nth int, _ webhooktest.Request) webhooktest.Answer {
		if nth <= len(codes) {
			return webhooktest.Answer{Status: codes[nth-1]}
		}
		return webhooktest.Answer{Status: codes[len(codes)-1]}
	}
}

func distinct(reqs []webhooktest.Request) map[string]bool {
	m := map[string]bool{}
	for _, r := range reqs {
		if r.ServiceSignatureOK {
			m[r.Delivery] = true
		}
	}
	return m
}

func eventsOf(reqs []webhooktest.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.Event
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func metric(t *testing.T, reg *prometheus.Registry, name string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return nil
}

func counter(t *testing.T, reg *prometheus.Registry, name, outcome string) float64 {
	t.Helper()
	for _, m := range metric(t, reg, name) {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" && l.GetValue() == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return metric(t, reg, name)[0].GetGauge().GetValue()
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	return metric(t, reg, name)[0].GetHistogram().GetSampleCount()
}
