// Package storetest sets up the store packages' tests: a fresh migrated database for
// each test (pkg/pgtest) and the rows most tests start from.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// NewPool returns a pool on a fresh database with the gateway's migrations, closed
// when the test ends.
func NewPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.New(t, migrations.Version(), migrations.Up))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewSmallPool is NewPool with at most maxConns connections; it also returns the
// database's URL.
func NewSmallPool(t *testing.T, maxConns int32) (*pgxpool.Pool, string) {
	t.Helper()
	url := pgtest.New(t, migrations.Version(), migrations.Up)
	cfg, err := database.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, url
}

// InsertUser adds a regular user and returns its id.
func InsertUser(t *testing.T, pool *pgxpool.Pool, email, name string) int64 {
	t.Helper()
	var id int64
	if err := pool.QueryRow(context.Background(), `INSERT INTO users (email, name, role) VALUES ($1, $2, 'regular') RETURNING id`, email, name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// DraftPackage is a new outbound draft of owner's, created at now, with a new id.
func DraftPackage(owner int64, now time.Time) app.Package {
	return app.Package{ID: uuid.New(), OwnerUserID: owner, Title: "T", RecipientEmail: "r@example.com",
		Direction: app.Outbound, State: app.StateDraft, TTLDays: 7, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
}
