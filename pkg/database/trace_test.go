package database_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/tracing"
)

// TestParseConfigTracer: a pool traces its statements only when tracing is on.
func TestParseConfigTracer(t *testing.T) {
	const url = "postgres://postgres@127.0.0.1:5432/x?sslmode=disable"
	if _, err := tracing.Setup(context.Background(), "database-test"); err != nil { // exporting off
		t.Fatal(err)
	}
	cfg, err := database.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ConnConfig.Tracer != nil {
		t.Fatal("tracing off, yet the pool has a tracer")
	}
	otel.SetTracerProvider(sdktrace.NewTracerProvider())
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	if cfg, err = database.ParseConfig(url); err != nil {
		t.Fatal(err)
	}
	if cfg.ConnConfig.Tracer == nil {
		t.Fatal("tracing on, yet the pool has no tracer")
	}
}
