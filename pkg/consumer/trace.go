package consumer

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/shipfile/shipfile/pkg/tracing"
)

// decisionKey is the span attribute that records what became of a message.
const decisionKey = attribute.Key("shipfile.consumer.decision")

// startSpans starts one span per message, "consume <consumer>", a child of the trace
// context its publisher set in its headers (traceparent, tracestate). The handler's
// context carries the span of a lone message; a batch's handler gets a span of its own,
// "consume <consumer> batch", linked to each message's span.
//
// With tracing off (tracing.Active) no span is started: the handler's context carries
// a lone message's trace context only, to pass on.
func startSpans(ctx context.Context, name string, msgs []jetstream.Msg) (context.Context, []trace.Span) {
	if !tracing.Active() {
		if len(msgs) == 1 {
			if h := msgs[0].Headers(); len(h) > 0 {
				ctx = tracing.Extract(ctx, tracing.Headers(h))
			}
		}
		return ctx, nil
	}
	tracer := tracing.Tracer()
	spans := make([]trace.Span, len(msgs), len(msgs)+1)
	spanName := "consume " + name
	var first context.Context
	for i, m := range msgs {
		mctx := ctx
		if h := m.Headers(); len(h) > 0 {
			mctx = tracing.Extract(ctx, tracing.Headers(h))
		}
		// Attributes only on a span that records: most are not sampled.
		mctx, spans[i] = tracer.Start(mctx, spanName, trace.WithSpanKind(trace.SpanKindConsumer))
		if spans[i].IsRecording() {
			spans[i].SetAttributes(
				semconv.MessagingSystemKey.String("nats"),
				semconv.MessagingDestinationName(m.Subject()),
				semconv.MessagingConsumerGroupName(name),
			)
		}
		if i == 0 {
			first = mctx
		}
	}
	if len(msgs) == 1 {
		return first, spans
	}
	links := make([]trace.Link, len(spans))
	for i, s := range spans {
		links[i] = trace.Link{SpanContext: s.SpanContext()}
	}
	bctx, batch := tracer.Start(ctx, "consume "+name+" batch",
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...),
		trace.WithAttributes(semconv.MessagingBatchMessageCount(len(msgs))))
	return bctx, append(spans, batch)
}

// endSpans records each message's decision on its span and ends them all.
func endSpans(spans []trace.Span, out []Decision) {
	for i, s := range spans {
		if i < len(out) && s.IsRecording() {
			s.SetAttributes(decisionKey.String(out[i].Action.String()))
			if out[i].Action == Term || out[i].Action == Retry {
				s.SetStatus(codes.Error, out[i].Reason)
			}
		}
		s.End()
	}
}
