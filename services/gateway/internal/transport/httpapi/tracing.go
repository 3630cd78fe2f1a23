package httpapi

import (
	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/otel/propagation"

	"github.com/shipfile/shipfile/pkg/tracing"
)

// traced is the router's outermost middleware. With tracing on, each request is a
// server span (otelgin) named "<METHOD> <route template>" and continuing the caller's
// traceparent; the raw URL path, which holds a link's token on the link routes, is
// replaced by the route template in its attributes (tracing.Setup's redaction). With
// tracing off, it only takes a caller's traceparent into the request's context, so
// that the events the request causes carry it on.
func traced() gin.HandlerFunc {
	if tracing.Active() {
		return otelgin.Middleware("shipfile-gateway")
	}
	return func(c *gin.Context) {
		if c.Request.Header.Get(tracing.TraceParent) != "" {
			c.Request = c.Request.WithContext(tracing.Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header)))
		}
		c.Next()
	}
}
