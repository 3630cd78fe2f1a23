package storage

import (
	"net/http"
	"strings"

	"github.com/minio/minio-go/v7"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/shipfile/shipfile/pkg/tracing"
)

// tracedTransport makes each request of the S3 client a span, "s3 <METHOD> <bucket>",
// within the span of the call's context (a client call outside a sampled span makes
// none). It records the bucket, the object key and the status, never the query string
// or headers (a request's signature).
type tracedTransport struct{ next http.RoundTripper }

// RoundTrip sends req within its span.
func (t tracedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !trace.SpanFromContext(ctx).IsRecording() {
		return t.next.RoundTrip(req)
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	ctx, span := tracing.Tracer().Start(ctx, "s3 "+req.Method+" "+bucket,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			semconv.HTTPRequestMethodKey.String(req.Method),
			semconv.ServerAddress(req.URL.Hostname()),
			attribute.String("aws.s3.bucket", bucket),
			attribute.String("aws.s3.key", key),
		))
	defer span.End()
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "request failed")
		return resp, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, resp.Status)
	}
	return resp, nil
}

// transport is the S3 client's HTTP transport: minio-go's default, traced when
// tracing is on.
func transport(secure bool) (http.RoundTripper, error) {
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	if !tracing.Active() {
		return tr, nil
	}
	return tracedTransport{next: tr}, nil
}
