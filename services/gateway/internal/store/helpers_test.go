package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// newPool returns a pool on a fresh database with the gateway's migrations, closed
// when the test ends.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.New(t, migrations.Version(), migrations.Up))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// insertUser adds a regular user and returns its id.
func insertUser(t *testing.T, pool *pgxpool.Pool, email, name string) int64 {
	t.Helper()
	var id int64
	if err := pool.QueryRow(context.Background(), `INSERT INTO users (email, name, role) VALUES ($1, $2, 'regular') RETURNING id`, email, name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
