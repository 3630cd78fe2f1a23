// Package database connects to PostgreSQL through a pgx/v5 pool.
package database

import (
	"context"
	"fmt"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/tracing"
)

// Config is the PostgreSQL part of a service's configuration.
type Config struct {
	URL string `env:"SHIPFILE_DATABASE_URL" default:"postgres://postgres@127.0.0.1:5432/shipfile?sslmode=disable" secret:"true" help:"PostgreSQL connection URL"`
}

// PlanCacheMode is the plan_cache_mode every pooled connection runs with, unless the URL
// names one (options=-c%20plan_cache_mode%3D... or plan_cache_mode=...).
//
// pgx prepares each statement once per connection. In PostgreSQL's default mode ("auto") a
// prepared statement switches to a generic plan after five executions when that plan looks
// no dearer than the custom ones, and keeps it until the table's statistics change. A
// statement first run while its table is nearly empty (a fresh database, or one whose
// statistics are stale: autovacuum off, as on CI machines) can thereby settle on a
// sequential scan and keep it while the table grows to millions of rows: every execution
// then reads the whole table (the dispatcher's group commit goes quadratic that way:
// docs/BENCHMARKS.md, "Dispatcher, issue 21 (2026-11-25): stale plans"). A custom plan is
// made from the actual parameters and the table's current size every time, so the hot
// statements stay index lookups whatever the statistics say, for a planning cost of tens of
// microseconds per statement.
const PlanCacheMode = "force_custom_plan"

// Open creates a pool and checks that the database answers. Its connections plan every
// prepared statement afresh (PlanCacheMode).
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return OpenAtLeast(ctx, url, 0)
}

// OpenAtLeast is Open with a pool of at least minConns connections (MaxConns raised to
// it when the URL or pgx's default gives fewer): for a service whose workers each hold
// a connection for a while, e.g. the mailer's while an e-mail is sent.
func OpenAtLeast(ctx context.Context, url string, minConns int) (*pgxpool.Pool, error) {
	cfg, err := ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if cfg.MaxConns < int32(minConns) {
		cfg.MaxConns = int32(minConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database: ping: %w", err)
	}
	return pool, nil
}

// ParseConfig parses a pool URL and adds the settings every service's pool runs with
// (PlanCacheMode, uuid.UUID encoded as its 16 bytes: registerUUID, and the tracer of
// its statements when tracing is on), for the callers that tune the pool further before opening it.
func ParseConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database: parse url: %w", err)
	}
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = PlanCacheMode
	}
	cfg.AfterConnect = registerUUID
	if tracing.Active() {
		// A span per statement, batch, COPY and connect made within a sampled span
		// (otelpgx starts none outside one), named for the operation; the statement's
		// parameters are never recorded.
		cfg.ConnConfig.Tracer = otelpgx.NewTracer()
	}
	return cfg, nil
}
