package transport

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shipfile/shipfile/pkg/tracing"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// TestSendTraceparent: every webhook request carries a traceparent, with tracing off
// too: the delivery's trace context when it has one, a fresh valid one otherwise; the
// body is sent as it was given.
func TestSendTraceparent(t *testing.T) {
	if _, err := tracing.Setup(context.Background(), "webhooks-test"); err != nil { // exporting off
		t.Fatal(err)
	}
	got := make(chan *http.Request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r }))
	defer srv.Close()
	s := NewSender(SenderOptions{Timeout: 2 * time.Second, AllowPrivate: true})
	parent := trace.SpanContextFromContext(tracing.EnsureSpanContext(context.Background())).WithTraceFlags(trace.FlagsSampled)

	for _, tc := range []struct {
		name string
		ctx  context.Context
		want trace.TraceID // zero: any valid one
	}{
		{"delivery's trace", trace.ContextWithRemoteSpanContext(context.Background(), parent), parent.TraceID()},
		{"none", context.Background(), trace.TraceID{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := s.Send(tc.ctx, app.Request{URL: srv.URL, Header: http.Header{"Webhook-Id": {"x"}}, Body: []byte(`{"a":1}`)})
			if resp.Err != nil {
				t.Fatal(resp.Err)
			}
			r := <-got
			sc := trace.SpanContextFromContext(tracing.Extract(context.Background(), tracing.Headers(map[string][]string{
				tracing.TraceParent: {r.Header.Get("Traceparent")},
			})))
			if !sc.IsValid() {
				t.Fatalf("traceparent %q is not a valid one", r.Header.Get("Traceparent"))
			}
			if tc.want.IsValid() && sc.TraceID() != tc.want {
				t.Fatalf("trace %s, want %s", sc.TraceID(), tc.want)
			}
		})
	}
}
