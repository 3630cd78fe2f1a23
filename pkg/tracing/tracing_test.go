package tracing

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"unset", nil, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x/v1/traces"}, true},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, false},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Enabled(env(tc.env)); got != tc.want {
				t.Fatalf("Enabled = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSampler(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    map[string]string
		ok     bool
		prefix string
	}{
		{"default ratio", nil, true, "ParentBased{root:TraceIDRatioBased{0.1}"},
		{"ratio from arg", map[string]string{"OTEL_TRACES_SAMPLER_ARG": "0.5"}, true, "ParentBased{root:TraceIDRatioBased{0.5}"},
		{"bad arg", map[string]string{"OTEL_TRACES_SAMPLER_ARG": "2"}, true, "ParentBased{root:TraceIDRatioBased{0.1}"},
		{"named sampler left to the SDK", map[string]string{"OTEL_TRACES_SAMPLER": "always_on"}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := sampler(env(tc.env))
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok && !strings.HasPrefix(s.Description(), tc.prefix) {
				t.Fatalf("sampler %q, want prefix %q", s.Description(), tc.prefix)
			}
		})
	}
}

func TestCarrierRoundTrip(t *testing.T) {
	if _, err := Setup(context.Background(), "test"); err != nil { // exporting off: propagator only
		t.Fatal(err)
	}
	if c := Carrier(context.Background()); c != nil {
		t.Fatalf("Carrier without a span = %v, want nil", c)
	}
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "op")
	defer span.End()
	c := Carrier(ctx)
	if c[TraceParent] == "" {
		t.Fatalf("Carrier = %v, want a traceparent", c)
	}
	h := Headers{}
	for k, v := range c {
		h.Set(k, v)
	}
	got := trace.SpanContextFromContext(Extract(context.Background(), h))
	if got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() || !got.IsRemote() {
		t.Fatalf("extracted %v, want the span's ids", got)
	}
}

func TestEnsureSpanContext(t *testing.T) {
	ctx := EnsureSpanContext(context.Background())
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || sc.IsSampled() {
		t.Fatalf("span context %v: want valid, not sampled", sc)
	}
	if again := trace.SpanContextFromContext(EnsureSpanContext(ctx)); again.TraceID() != sc.TraceID() {
		t.Fatal("a valid span context was replaced")
	}
}

func TestRedactor(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(redactor{}), sdktrace.WithSpanProcessor(rec))
	for _, tc := range []struct {
		name  string
		attrs []attribute.KeyValue
		want  map[attribute.Key]string
	}{
		{"route", []attribute.KeyValue{urlPath.String("/api/v1/links/SECRET"), httpRoute.String("/api/v1/links/:token")},
			map[attribute.Key]string{urlPath: "/api/v1/links/:token"}},
		{"no route", []attribute.KeyValue{urlPath.String("/d/SECRET")}, map[attribute.Key]string{urlPath: Unmatched}},
		{"full url and query", []attribute.KeyValue{urlFull.String("http://x/d/SECRET?t=SECRET"), urlQuery.String("t=SECRET")},
			map[attribute.Key]string{urlFull: Redacted, urlQuery: Redacted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, span := tp.Tracer("t").Start(context.Background(), "GET", trace.WithAttributes(tc.attrs...))
			span.End()
			ended := rec.Ended()
			for _, a := range ended[len(ended)-1].Attributes() {
				if strings.Contains(a.Value.Emit(), "SECRET") {
					t.Errorf("%s = %q", a.Key, a.Value.Emit())
				}
				if want, ok := tc.want[a.Key]; ok && a.Value.AsString() != want {
					t.Errorf("%s = %q, want %q", a.Key, a.Value.AsString(), want)
				}
			}
		})
	}
}
