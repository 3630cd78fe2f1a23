package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
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

// compareTraced adds, for each row of traced (the rows run again with tracing on), a
// row comparing its rate with the same row of rep (tracing off, same run): ≥ 0.95×.
func compareTraced(rep, traced *Report, mode string, sink *otlpSink) {
	sampling := samplingText(mode)
	off := map[string]string{}
	for _, r := range rep.Rows {
		off[r.What] = r.Measured
	}
	for _, r := range traced.Rows {
		row := Row{What: r.What + ", tracing on (" + sampling + ")", Measured: r.Measured, Target: "≥ 0.95× of tracing off"}
		base, ok := off[r.What]
		on, okOn := leadingRate(r.Measured)
		offRate, okOff := leadingRate(base)
		switch {
		case !ok || !okOn || !okOff:
			row.Verdict = "not compared (" + firstLine(r.Verdict) + ")"
		default:
			row.Baseline = base + " (tracing off, same run)"
			row.Ratio = ratio(on, offRate)
			row.Verdict = verdict(on >= 0.95*offRate, "%.2f× of tracing off", on/offRate)
		}
		rep.Add(row)
	}
	rep.Raw = append(rep.Raw, fmt.Sprintf("tracing on (%s): the services sent %d OTLP export requests, %d bytes, to shipbench's sink",
		sampling, sink.requests.Load(), sink.bytes.Load()))
}

// leadingRate is the number a row's Measured starts with ("1234 req/s, p50 …").
func leadingRate(measured string) (float64, bool) {
	f, _, _ := strings.Cut(measured, " ")
	v, err := strconv.ParseFloat(f, 64)
	return v, err == nil && v > 0
}
