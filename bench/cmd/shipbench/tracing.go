package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
)

// otlpSink is an OTLP/HTTP receiver that reads and discards what the services export,
// counting it: tracing's cost measured without a trace backend's.
type otlpSink struct {
	srv             *httptest.Server
	requests, bytes atomic.Int64
}

// newOTLPSink starts an OTLP/HTTP receiver on loopback.
func newOTLPSink() *otlpSink {
	s := &otlpSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.requests.Add(1)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse
	}))
	return s
}

// env is what a service process needs to export its traces to the sink: with mode
// "full" every trace is sampled, otherwise the services' default sampling applies.
func (s *otlpSink) env(mode string) []string {
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + s.srv.URL}
	if mode == "full" {
		env = append(env, "OTEL_TRACES_SAMPLER=parentbased_always_on")
	}
	return env
}

func (s *otlpSink) close() { s.srv.Close() }

// startTracing turns tracing on for the processes started from now on (they inherit
// the environment), exporting to sink. The returned function turns it off again.
func startTracing(sink *otlpSink, mode string) func() {
	for _, kv := range sink.env(mode) {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	return func() {
		os.Unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		os.Unsetenv("OTEL_TRACES_SAMPLER")
	}
}

// samplingText names a -tracing mode's sampling in the report.
func samplingText(mode string) string {
	if mode == "full" {
		return "every trace sampled"
	}
	return "default sampling"
}

// tracedPairs is how many pairs of one-dispatcher runs (tracing off, tracing on) the
// tracing comparison of the dispatch row takes; the pairs swap which side goes first.
const tracedPairs = 3

// tracedDispatchRow compares one dispatcher with tracing on (exporting to sink) with one
// dispatcher without, in runs that alternate, each on a fresh stack as the dispatch row's
// runs are: the median of the pairs' ratios, ≥ 0.95×.
func tracedDispatchRow(ctx context.Context, t testing.TB, c config, bins rig.Bins, rep *Report, sink *otlpSink) {
	rcv := rig.StartReceiver(t)
	var on, off []float64
	runs := 2 * tracedPairs
	for k := 0; k < runs && ctx.Err() == nil; k++ {
		traced := (k%2 == 0) == (k/2%2 == 1) // off, on; on, off; off, on
		runEnd := time.Now().Add(time.Until(deadlineOf(ctx)) / time.Duration(runs-k))
		var res runResult
		err := rig.Run(fmt.Sprintf("dispatch, tracing run %d", k+1), os.Stderr, func(t testing.TB) {
			if traced {
				defer startTracing(sink, c.tracing)()
			}
			res = dispatchRun(ctx, t, c, bins, rcv, fmt.Sprintf("trace%d-", k+1), 1, false, false, runEnd)
		})
		if err != nil {
			t.Fatalf("dispatch, tracing run %d: %v", k+1, err)
		}
		want := int64(c.events * c.subscriptions)
		if res.got < want {
			break // a run cut short by the budget says nothing of tracing's cost
		}
		rate := float64(res.got) / res.took.Seconds()
		rep.Rawf("dispatch, 1 instance, tracing %s: %d deliveries in %s = %.0f/s; the dispatcher used %.3f ms of CPU a delivery",
			map[bool]string{true: "on (" + samplingText(c.tracing) + ")", false: "off"}[traced], res.got, res.took.Round(time.Millisecond), rate, perRequest(res.used, int(res.got)))
		if traced {
			on = append(on, rate)
		} else {
			off = append(off, rate)
		}
	}
	what := fmt.Sprintf("dispatcher, tracing on (%s): %d events × %d subscriptions, 1 instance", samplingText(c.tracing), c.events, c.subscriptions)
	paired, pairs := pairedRatio(on, off)
	if pairs == 0 {
		rep.Add(Row{What: what, Verdict: "not run (the row's budget ended first)"})
		return
	}
	rep.Add(Row{
		What:     what,
		Measured: fmt.Sprintf("%.0f deliveries/s (median)", rig.Median(on)),
		Baseline: fmt.Sprintf("%.0f deliveries/s (median; tracing off, runs taking turns)", rig.Median(off)),
		Ratio:    fmt.Sprintf("%.2f× (median of %d pairs' ratios: %s)", paired, pairs, sliceRatios(on, off)),
		Target:   "≥ 0.95× of tracing off",
		Verdict:  verdict(paired >= 0.95, "%.2f× of tracing off", paired),
	})
}
