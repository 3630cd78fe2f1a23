package consumer_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/tracing"
)

// TestProcessContinuesTrace: a message's handler runs in a span that is a child of the
// traceparent in the message's headers, named for the consumer.
func TestProcessContinuesTrace(t *testing.T) {
	if _, err := tracing.Setup(context.Background(), "consumer-test"); err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })

	psc := trace.SpanContextFromContext(tracing.EnsureSpanContext(context.Background())).WithTraceFlags(trace.FlagsSampled)
	parent := trace.ContextWithRemoteSpanContext(context.Background(), psc)
	h := nats.Header{}
	tracing.Inject(parent, tracing.Headers(h))

	var inHandler trace.SpanContext
	r := consumer.NewSingle(func(ctx context.Context, _ jetstream.Msg) consumer.Decision {
		inHandler = trace.SpanContextFromContext(ctx)
		return consumer.Acked()
	}, consumer.Options{Name: "mailer"})
	m := &fakeMsg{data: "x", delivered: 1, header: h}
	r.Process(context.Background(), m)

	if inHandler.TraceID() != psc.TraceID() {
		t.Fatalf("handler's trace %s, want the message's %s", inHandler.TraceID(), psc.TraceID())
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != "consume mailer" || spans[0].Parent().SpanID() != psc.SpanID() {
		t.Fatalf("spans %v, want one \"consume mailer\" under the message's span", spans)
	}
}

// BenchmarkProcessTracingOff is BenchmarkProcessInstrumented with tracing set up and
// exporting off, as a service runs without OTEL_EXPORTER_OTLP_ENDPOINT.
func BenchmarkProcessTracingOff(b *testing.B) {
	if _, err := tracing.Setup(context.Background(), "bench"); err != nil {
		b.Fatal(err)
	}
	BenchmarkProcessInstrumented(b)
}
