package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Attributes the HTTP instrumentation records that may hold a secret: the raw path of a
// link route holds its token.
const (
	urlPath   = attribute.Key("url.path")
	urlFull   = attribute.Key("url.full")
	urlQuery  = attribute.Key("url.query")
	httpRoute = attribute.Key("http.route")
	// Unmatched is the url.path of a request that matched no route.
	Unmatched = "(unmatched)"
	// Redacted is the value of url.full and url.query.
	Redacted = "(redacted)"
)

// redactor is a span processor that replaces, as a span starts, its url.path by its
// http.route (the route template, e.g. /api/v1/links/:token; Unmatched when there is
// none) and its url.full and url.query by Redacted, so that no exported span holds a
// link's token.
type redactor struct{}

// OnStart redacts s.
func (redactor) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	var route string
	var path, full, query bool
	for _, a := range s.Attributes() {
		switch a.Key {
		case urlPath:
			path = true
		case urlFull:
			full = true
		case urlQuery:
			query = true
		case httpRoute:
			route = a.Value.AsString()
		}
	}
	if path {
		if route == "" {
			route = Unmatched
		}
		s.SetAttributes(urlPath.String(route))
	}
	if full {
		s.SetAttributes(urlFull.String(Redacted))
	}
	if query {
		s.SetAttributes(urlQuery.String(Redacted))
	}
}

// OnEnd does nothing.
func (redactor) OnEnd(sdktrace.ReadOnlySpan) {}

// Shutdown does nothing.
func (redactor) Shutdown(context.Context) error { return nil }

// ForceFlush does nothing.
func (redactor) ForceFlush(context.Context) error { return nil }
