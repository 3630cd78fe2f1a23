package transport

import (
	"context"
	"net/url"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/shipfile/shipfile/pkg/tracing"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// sendSpanName is the name of a webhook request's span.
const sendSpanName = "webhook POST"

// startSend starts the span of one webhook request, "webhook POST", a child of the
// delivery's span (its consumer's), and writes its W3C trace context (traceparent, and
// tracestate when there is one) into hreq's headers, so that the receiver can join the
// trace. The headers go out also when this process does not trace: the trace context of
// the event's message then, or a fresh one. The span records the receiver's host, never
// the URL (which may carry credentials); the body and its signature are untouched.
func startSend(ctx context.Context, u *url.URL, hreq *fasthttp.Request) trace.Span {
	var span trace.Span
	if tracing.Active() {
		ctx, span = tracing.Tracer().Start(ctx, sendSpanName, trace.WithSpanKind(trace.SpanKindClient))
		if span.IsRecording() { // attributes only on a span that records: most are not sampled
			span.SetAttributes(
				semconv.HTTPRequestMethodKey.String("POST"),
				semconv.ServerAddress(u.Hostname()),
			)
		}
	} else {
		span = trace.SpanFromContext(ctx) // a no-op span
	}
	tracing.Inject(tracing.EnsureSpanContext(ctx), fasthttpHeaders{&hreq.Header})
	return span
}

// endSend records the answer on the request's span and ends it.
func endSend(span trace.Span, resp app.Response) {
	if span.IsRecording() {
		if resp.StatusCode != 0 {
			span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
		}
		if resp.Err != nil {
			span.SetStatus(codes.Error, resp.Err.Error())
		} else if resp.StatusCode >= 300 {
			span.SetStatus(codes.Error, "receiver answered "+fasthttp.StatusMessage(resp.StatusCode))
		}
	}
	span.End()
}

// fasthttpHeaders carries trace context into a fasthttp request's headers.
type fasthttpHeaders struct{ h *fasthttp.RequestHeader }

func (c fasthttpHeaders) Get(key string) string { return string(c.h.Peek(key)) }
func (c fasthttpHeaders) Set(key, value string) { c.h.Set(key, value) }
func (c fasthttpHeaders) Keys() []string {
	var keys []string
	for k := range c.h.All() {
		keys = append(keys, string(k))
	}
	return keys
}
