// Package schematest gives any service's tests a PostgreSQL database with the one
// schema: the gateway's migrations (services/gateway/migrations). The gateway owns the
// schema and services never import each other, so pkg/pgtest reads and applies the
// migration files themselves; a change to them makes a new template database.
package schematest

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/pgtest"
)

// MigrationsDir is the gateway's migration directory relative to the repository root.
const MigrationsDir = "services/gateway/migrations"

// New returns the URL of a fresh database with the gateway's schema, dropped when the
// test ends.
func New(t testing.TB) string { return pgtest.NewGoose(t, MigrationsDir) }

// Pool returns a pool on a fresh database with the gateway's schema, closed when the
// test ends.
func Pool(t testing.TB) (*pgxpool.Pool, string) { return pgtest.PoolGoose(t, MigrationsDir) }
