package httpapi

import (
	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/shipfile/shipfile/pkg/tracing"
)

// traced is the router's outermost middleware. With tracing on, each request is a
// server span named "<METHOD> <route template>" ("<METHOD> (unmatched)" for no route),
// continuing the caller's traceparent. Its attributes (method, route, status, client
// address) are set only on a sampled span, so that an unsampled request costs a span
// start and no more; url.path holds the route template, never the raw path, which holds
// a link's token on the link routes. (otelgin builds its attributes and records its
// metrics on every request, sampled or not: several times the cost.) With tracing off,
// it only takes a caller's traceparent into the request's context, so that the events
// the request causes carry it on.
func traced() gin.HandlerFunc {
	if !tracing.Active() {
		return func(c *gin.Context) {
			if c.Request.Header.Get(tracing.TraceParent) != "" {
				c.Request = c.Request.WithContext(tracing.Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header)))
			}
			c.Next()
		}
	}
	tracer := tracing.Tracer()
	return func(c *gin.Context) {
		ctx := c.Request.Context()
		if c.Request.Header.Get(tracing.TraceParent) != "" {
			ctx = tracing.Extract(ctx, propagation.HeaderCarrier(c.Request.Header))
		}
		route := c.FullPath()
		if route == "" {
			route = tracing.Unmatched
		}
		ctx, span := tracer.Start(ctx, c.Request.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		if span.IsRecording() {
			span.SetAttributes(
				semconv.HTTPRequestMethodKey.String(c.Request.Method),
				semconv.HTTPRoute(route),
				semconv.URLPath(route),
				semconv.ClientAddress(c.ClientIP()),
			)
		}
		c.Request = c.Request.WithContext(ctx)
		c.Next()
		if span.IsRecording() {
			status := c.Writer.Status()
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
			if status >= 500 {
				span.SetStatus(codes.Error, "")
			}
		}
	}
}
