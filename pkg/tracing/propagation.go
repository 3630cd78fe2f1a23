package tracing

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace context fields, as header names and as the keys of a stored carrier.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// Headers is a carrier over message headers (nats.Header's underlying type) that
// keeps the keys exactly as written, lower case: NATS headers are case-sensitive.
type Headers map[string][]string

// Get returns the first value of key.
func (h Headers) Get(key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set replaces the values of key.
func (h Headers) Set(key, value string) { h[key] = []string{value} }

// Keys lists the keys.
func (h Headers) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

var _ propagation.TextMapCarrier = Headers(nil)

// Carrier returns the trace context of ctx's span as W3C fields (traceparent, and
// tracestate when there is one), or nil when ctx holds no valid span context: what an
// outbox row stores for the relay to put in the message's headers.
func Carrier(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// Extract returns ctx with the remote span context carried by c (a message's headers,
// a stored carrier), when c carries one.
func Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, c)
}

// Inject writes ctx's trace context into c.
func Inject(ctx context.Context, c propagation.TextMapCarrier) {
	otel.GetTextMapPropagator().Inject(ctx, c)
}

// EnsureSpanContext returns ctx unchanged when it holds a valid span context, else ctx
// with a fresh one (random trace and span ids, not sampled): for an outgoing request
// that carries a traceparent whether or not this process traces, so that its receiver
// can start a trace of its own that later joins what the sender records.
func EnsureSpanContext(ctx context.Context) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	var tid trace.TraceID
	var sid trace.SpanID
	for !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
}
