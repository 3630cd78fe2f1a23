package outbox_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/shipfile/shipfile/pkg/outbox"
	"github.com/shipfile/shipfile/pkg/tracing"
)

// TestTraceContextCarried: the trace context of the writer's transaction travels in the
// row to the message's traceparent header, for one message and for several in one
// statement; a writer without one publishes without the header.
func TestTraceContextCarried(t *testing.T) {
	if _, err := tracing.Setup(context.Background(), "outbox-test"); err != nil { // no exporter: propagator only
		t.Fatal(err)
	}
	f := setup(t)
	ctx, span := sdktrace.NewTracerProvider().Tracer("t").Start(t.Context(), "change")
	span.End()
	want := span.SpanContext().TraceID()

	for _, batch := range [][]outbox.Message{{f.msg("one")}, {f.msg("a"), f.msg("b")}} {
		if err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error { return outbox.Insert(ctx, tx, batch...) }); err != nil {
			t.Fatal(err)
		}
	}
	f.insert(t, f.msg("untraced"))
	relay := outbox.NewRelay(f.pool, f.js, outbox.Options{})
	if err := relay.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	info, err := f.stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 4 {
		t.Fatalf("stream holds %d messages, want 4", info.State.Msgs)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := f.stream.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		tp := m.Header.Get(tracing.TraceParent)
		if string(m.Data) == "untraced" {
			if tp != "" {
				t.Errorf("untraced message has traceparent %q", tp)
			}
			continue
		}
		got := trace.SpanContextFromContext(tracing.Extract(context.Background(), tracing.Headers(m.Header)))
		if got.TraceID() != want {
			t.Errorf("message %q: traceparent %q, want trace %s", m.Data, tp, want)
		}
	}
}
