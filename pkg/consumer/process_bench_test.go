package consumer_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/consumer"
)

// BenchmarkProcessInstrumented is the runtime's own work for one message of a
// single-message consumer with metrics: the middleware chain and the settle.
func BenchmarkProcessInstrumented(b *testing.B) {
	m, err := consumer.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	r := consumer.NewSingle(func(context.Context, jetstream.Msg) consumer.Decision { return consumer.Acked() },
		consumer.Options{Name: "bench", Metrics: m})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r.Process(ctx, &fakeMsg{data: "x", delivered: 1})
	}
}
