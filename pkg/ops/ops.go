// Package ops serves the operational endpoints every shipfile service has: /healthz
// (the process is alive), /readyz (its dependencies answer) and /metrics (Prometheus).
package ops

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one named readiness check of a dependency.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// checkTimeout bounds each readiness check so a hung dependency answers "not ready"
// instead of hanging the probe.
const checkTimeout = 2 * time.Second

// NewRegistry returns a Prometheus registry with the Go and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Healthz answers 200 while the process runs.
func Healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Readyz returns a handler that runs every check and answers 200 when all pass, 503
// otherwise, naming each failing dependency.
func Readyz(checks ...Check) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		results := make(map[string]string, len(checks))
		status := http.StatusOK
		for _, c := range checks {
			ctx, cancel := context.WithTimeout(r.Context(), checkTimeout)
			err := c.Fn(ctx)
			cancel()
			if err != nil {
				results[c.Name] = err.Error()
				status = http.StatusServiceUnavailable
			} else {
				results[c.Name] = "ok"
			}
		}
		state := "ready"
		if status != http.StatusOK {
			state = "not ready"
		}
		writeJSON(w, status, map[string]any{"status": state, "checks": results})
	}
}

// Metrics returns the /metrics handler of reg.
func Metrics(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// Handler returns a mux serving /healthz, /readyz and /metrics.
func Handler(reg *prometheus.Registry, checks ...Check) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", Healthz)
	mux.Handle("GET /readyz", Readyz(checks...))
	mux.Handle("GET /metrics", Metrics(reg))
	return mux
}

// ReadHeaderTimeout is how long a client has to send a request's headers.
const ReadHeaderTimeout = 10 * time.Second

// Option changes the http.Server of Serve.
type Option func(*http.Server)

// WithIdleTimeout closes a keep-alive connection that carries no request for d
// (without it, net/http falls back to ReadTimeout, which Serve leaves unset: no
// limit).
func WithIdleTimeout(d time.Duration) Option {
	return func(s *http.Server) { s.IdleTimeout = d }
}

// Serve listens on addr and serves h until ctx is cancelled, then shuts down within
// the grace period. It returns nil after a clean shutdown. Request headers must
// arrive within ReadHeaderTimeout.
func Serve(ctx context.Context, log *slog.Logger, addr string, h http.Handler, grace time.Duration, opts ...Option) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ServeListener(ctx, log, ln, h, grace, opts...)
}

// ServeListener is Serve on an existing listener.
func ServeListener(ctx context.Context, log *slog.Logger, ln net.Listener, h http.Handler, grace time.Duration, opts ...Option) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	for _, o := range opts {
		o(srv)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
