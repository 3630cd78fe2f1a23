// Package tracing sets up OpenTelemetry tracing for a shipfile binary from the standard
// OTEL_* variables, and carries W3C trace context (traceparent, tracestate) where a
// change travels: outbox rows, NATS message headers and webhook requests.
//
// Tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// is set: spans are batched and exported over OTLP/HTTP (protobuf), the exporter's own
// OTEL_EXPORTER_OTLP_* variables (headers, timeout, insecure) and the batch processor's
// OTEL_BSP_* variables apply. Otherwise (or with OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none) the tracer provider is a no-op that costs nothing, but the
// W3C propagator is installed all the same, so an incoming traceparent still flows on.
//
// Sampling is parent-based: a span whose parent was sampled (or not) follows it; a root
// span is sampled with probability DefaultRatio, unless OTEL_TRACES_SAMPLER (and
// OTEL_TRACES_SAMPLER_ARG) name another sampler, or OTEL_TRACES_SAMPLER_ARG alone
// another ratio.
//
// No exported span holds a URL's raw path or query: the route template stands for the
// path (a link route's path holds its token).
package tracing

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultRatio is the share of root spans (requests and jobs that arrive without a
// sampled parent) that are sampled when OTEL_TRACES_SAMPLER is unset.
const DefaultRatio = 0.1

// Instrumentation is the instrumentation scope of shipfile's own spans.
const Instrumentation = "github.com/shipfile/shipfile"

// Shutdown flushes the spans not yet exported and stops the exporter, within ctx.
type Shutdown func(ctx context.Context) error

// Enabled reports whether env turns exporting on (see the package doc). getenv is
// os.Getenv in production.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the process-wide propagator (W3C trace context and baggage) and tracer
// provider for the binary called name (the service name unless OTEL_SERVICE_NAME says
// otherwise: "shipfile-" + name), and returns the Shutdown that flushes it. With
// exporting off the provider is a no-op and Shutdown does nothing. Setup is called once,
// by service.Main.
func Setup(ctx context.Context, name string) (Shutdown, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !Enabled(os.Getenv) {
		otel.SetTracerProvider(noop.NewTracerProvider())
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("shipfile-"+name)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
		resource.WithHost(),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithSpanProcessor(redactor{}),
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
	}
	if s, ok := sampler(os.Getenv); ok {
		opts = append(opts, sdktrace.WithSampler(s))
	} // else the SDK reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG itself
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// sampler is the sampler when OTEL_TRACES_SAMPLER is unset: parent-based, roots sampled
// at OTEL_TRACES_SAMPLER_ARG's ratio, or DefaultRatio. ok is false when
// OTEL_TRACES_SAMPLER is set (the SDK then builds the sampler it names).
func sampler(getenv func(string) string) (s sdktrace.Sampler, ok bool) {
	if getenv("OTEL_TRACES_SAMPLER") != "" {
		return nil, false
	}
	ratio := DefaultRatio
	if arg := getenv("OTEL_TRACES_SAMPLER_ARG"); arg != "" {
		if r, err := strconv.ParseFloat(arg, 64); err == nil && r >= 0 && r <= 1 {
			ratio = r
		}
	}
	return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), true
}

// Active reports whether the process's tracer provider records spans: false after
// Setup with exporting off (a no-op provider), where instrumented code skips starting
// spans and only passes trace context on.
func Active() bool {
	_, off := otel.GetTracerProvider().(noop.TracerProvider)
	return !off
}

// Tracer is the tracer of shipfile's own spans, from the process's provider. It is
// looked up once per provider: instrumented code asks for it once per message or
// request, and the SDK's provider answers under a lock.
func Tracer() trace.Tracer {
	p := otel.GetTracerProvider()
	if c := tracerCache.Load(); c != nil && c.provider == p {
		return c.tracer
	}
	t := p.Tracer(Instrumentation)
	tracerCache.Store(&cachedTracer{provider: p, tracer: t})
	return t
}

// cachedTracer is Tracer's answer for one provider.
type cachedTracer struct {
	provider trace.TracerProvider
	tracer   trace.Tracer
}

var tracerCache atomic.Pointer[cachedTracer]
