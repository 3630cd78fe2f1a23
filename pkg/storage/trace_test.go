package storage

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

// TestTracedTransport: a request within a sampled span is a child span named for its
// method and bucket, without the query string; one outside any span makes none.
func TestTracedTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	ctx, parent := tp.Tracer("t").Start(context.Background(), "upload")
	client := &http.Client{Transport: tracedTransport{next: http.DefaultTransport}}

	for _, c := range []context.Context{ctx, context.Background()} {
		req, err := http.NewRequestWithContext(c, http.MethodPut, srv.URL+"/files/pkg/1?X-Amz-Signature=secret", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	parent.End()
	spans := rec.Ended()
	if len(spans) != 2 || spans[0].Name() != "s3 PUT files" || spans[0].Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("spans %v, want \"s3 PUT files\" under the upload's span, then the upload's", spans)
	}
	for _, a := range spans[0].Attributes() {
		if a.Value.Emit() == "" || a.Key == "url.full" || a.Key == "url.query" {
			t.Errorf("attribute %s = %q", a.Key, a.Value.Emit())
		}
	}
}
