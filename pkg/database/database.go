// Package database connects to PostgreSQL through a pgx/v5 pool.
package database

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Config is the PostgreSQL part of a service's configuration.
type Config struct {
	URL string `env:"SHIPFILE_DATABASE_URL" default:"postgres://postgres@127.0.0.1:5432/shipfile?sslmode=disable" secret:"true" help:"PostgreSQL connection URL"`
}

// Open creates a pool and checks that the database answers.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database: parse url: %w", err)
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
