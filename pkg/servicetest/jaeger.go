package servicetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// JaegerBinName is the file name of the Jaeger all-in-one binary in the project's cache
// (scripts/dev.sh builds the pinned one there).
const JaegerBinName = "jaeger-all-in-one"

// Jaeger is a private Jaeger all-in-one process (in-memory storage) on 127.0.0.1 that
// receives OTLP and answers its query API.
type Jaeger struct {
	// OTLPEndpoint is the OTLP/HTTP receiver's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT
	// wants it.
	OTLPEndpoint string
	// QueryURL is the base URL of the UI and its query API (/api/traces, /api/services).
	QueryURL string
}

// JaegerBin finds the Jaeger all-in-one binary: SHIPFILE_JAEGER_BIN, the project's cache,
// or PATH. A test that needs it fails when there is none.
func JaegerBin(t testing.TB) string {
	t.Helper()
	candidates := []string{os.Getenv("SHIPFILE_JAEGER_BIN")}
	if dir, err := os.UserCacheDir(); err == nil {
		candidates = append(candidates, filepath.Join(dir, "shipfile", "bin", JaegerBinName))
	}
	if p, err := exec.LookPath(JaegerBinName); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c); c != "" && err == nil && !fi.IsDir() {
			return c
		}
	}
	t.Fatal("no Jaeger binary: scripts/dev.sh test (make test) and up (make up) build one into ~/.cache/shipfile/bin/" +
		JaegerBinName + "; or set SHIPFILE_JAEGER_BIN")
	return ""
}

// StartJaeger runs a private Jaeger for the test, every port of it on a free one of
// 127.0.0.1, and returns it once its query API answers. It is stopped when the test ends.
func StartJaeger(t testing.TB) *Jaeger {
	t.Helper()
	bin := JaegerBin(t)
	otlp, otlpGRPC, query, admin := FreeAddr(t), FreeAddr(t), FreeAddr(t), FreeAddr(t)
	args := []string{
		"--collector.otlp.http.host-port=" + otlp,
		"--collector.otlp.grpc.host-port=" + otlpGRPC,
		"--collector.http-server.host-port=" + FreeAddr(t),
		"--collector.grpc-server.host-port=" + FreeAddr(t),
		"--query.http-server.host-port=" + query,
		"--query.grpc-server.host-port=" + FreeAddr(t),
		"--admin.http.host-port=" + admin,
		"--log-level=warn",
	}
	// Jaeger traces itself over OTLP/gRPC: to its own receiver, nothing sampled.
	StartProcess(t, bin, []string{"SPAN_STORAGE_TYPE=memory", "OTEL_EXPORTER_OTLP_ENDPOINT=http://" + otlpGRPC, "OTEL_TRACES_SAMPLER=always_off"}, args...)
	j := &Jaeger{OTLPEndpoint: "http://" + otlp, QueryURL: "http://" + query}
	client := &http.Client{Timeout: time.Second}
	WaitFor(t, 60*time.Second, "Jaeger's query API on "+query, func() bool {
		resp, err := client.Get(j.QueryURL + "/api/services")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return j
}

// JaegerTrace is a trace as Jaeger's query API returns it.
type JaegerTrace struct {
	TraceID string       `json:"traceID"`
	Spans   []JaegerSpan `json:"spans"`
	// Processes are the spans' processes by JaegerSpan.ProcessID.
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// JaegerSpan is one span of a JaegerTrace.
type JaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	ProcessID     string `json:"processID"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
}

// Traces returns the traces of service that Jaeger holds (GET /api/traces?service=…),
// the latest limit of them.
func (j *Jaeger) Traces(service string, limit int) ([]JaegerTrace, error) {
	resp, err := http.Get(fmt.Sprintf("%s/api/traces?service=%s&limit=%d&lookback=1h", j.QueryURL, service, limit))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jaeger: GET /api/traces?service=%s: %s", service, resp.Status)
	}
	var out struct {
		Data []JaegerTrace `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("jaeger: decode traces: %w", err)
	}
	return out.Data, nil
}
