package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestTraceUploadToWebhook: with tracing on (a real Jaeger receiving OTLP), one upload's
// trace runs from the gateway's HTTP request through its outbox row and the NATS message
// to the dispatcher's consumer and the webhook POST, as Jaeger's query API shows; the
// receiver got a traceparent of that very trace.
func TestTraceUploadToWebhook(t *testing.T) {
	jaeger := servicetest.StartJaeger(t)
	// Every process the test starts inherits these: tracing on, every trace sampled,
	// spans exported within 100 ms.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", jaeger.OTLPEndpoint)
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	common, token, gwAddr := startGateway(t)
	addr := servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["webhooks"], append(common, "SHIPFILE_WEBHOOKS_ADDR="+addr))
	servicetest.WaitReady(t, addr)

	rcv := &receiver{statuses: map[string]int{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	a := servicetest.Client{T: t, Base: "http://" + gwAddr, Token: token}
	a.Must("POST", "/api/v1/admin/webhooks", map[string]any{"url": srv.URL + "/uploads", "events": []string{"package.file_uploaded"}}, http.StatusCreated)
	p := a.Must("POST", "/api/v1/packages", map[string]any{"title": "traced", "recipient_email": "bob@example.com", "ttl_days": 1}, http.StatusCreated)
	a.Upload("/api/v1/packages/"+p["id"].(string)+"/files", "report.pdf", []byte("%PDF-1.7 traced"))

	servicetest.WaitFor(t, 30*time.Second, "the upload's webhook", func() bool { return len(rcv.of("uploads")) >= 1 })
	d := rcv.of("uploads")[0]
	tp := d.headers.Get("Traceparent")
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(d.headers)))
	if !sc.IsValid() {
		t.Fatalf("the webhook came without a valid traceparent (%q)", tp)
	}
	traceID := sc.TraceID().String()

	// The spans a trace must hold, by service: the gateway's request, the relay's publish,
	// the dispatcher's consume and its POST (whose span the receiver's traceparent names).
	want := []struct{ service, prefix string }{
		{"shipfile-gateway", "POST /api/v1/packages/:id/files"},
		{"shipfile-gateway", "outbox publish "},
		{"shipfile-webhooks", "consume "},
		{"shipfile-webhooks", "webhook POST"},
	}
	var found *servicetest.JaegerTrace
	var missing []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		found, missing = nil, nil
		traces, err := jaeger.Traces("shipfile-webhooks", 50)
		if err != nil {
			t.Fatal(err)
		}
		for i := range traces {
			if traces[i].TraceID == traceID {
				found = &traces[i]
			}
		}
		if found == nil {
			missing = []string{"the whole trace " + traceID}
		} else {
			for _, w := range want {
				if !slices.ContainsFunc(found.Spans, func(s servicetest.JaegerSpan) bool {
					return found.Processes[s.ProcessID].ServiceName == w.service && strings.HasPrefix(s.OperationName, w.prefix)
				}) {
					missing = append(missing, w.service+" "+w.prefix+"…")
				}
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger's traces of shipfile-webhooks lack %s", strings.Join(missing, ", "))
		}
	}

	// The receiver's traceparent names the POST's own span.
	for _, s := range found.Spans {
		if s.OperationName == "webhook POST" && s.SpanID != sc.SpanID().String() {
			t.Errorf("the receiver's traceparent %s names span %s, not the webhook POST's %s", tp, sc.SpanID(), s.SpanID)
		}
	}
	// No span holds the raw path of a link route: every span is named for its route.
	for _, s := range found.Spans {
		if strings.Contains(s.OperationName, p["id"].(string)) {
			t.Errorf("span %q holds a raw path", s.OperationName)
		}
	}
}
