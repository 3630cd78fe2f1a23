// Package pgtest gives each test its own PostgreSQL database, cloned from a template
// database that has the schema migrations applied once. The server comes from
// SHIPFILE_TEST_DATABASE_URL (default: the local server's postgres database); a test
// whose server is unreachable fails, it never skips.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultAdminURL is used when SHIPFILE_TEST_DATABASE_URL is unset.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// lockKey serialises template creation and cloning across parallel test binaries.
const lockKey = 0x5f1ef11e

// Migrate applies a schema to the database at url.
type Migrate func(ctx context.Context, url string) error

// AdminURL is the maintenance database URL tests connect to.
func AdminURL() string {
	if u := os.Getenv("SHIPFILE_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultAdminURL
}

// New creates a fresh database for the test, cloned from the template named after
// version (which must change whenever the migrations change), and drops it when the
// test ends. It returns the new database's URL.
func New(t testing.TB, version string, migrate Migrate) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := AdminURL()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: PostgreSQL at %s is not reachable (start it with `make up` or `make test`): %v", redact(admin), err)
	}
	defer conn.Close(ctx)

	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		t.Fatalf("pgtest: lock: %v", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", lockKey) //nolint:errcheck

	tmpl := "shipfile_tmpl_" + version
	if err := ensureTemplate(ctx, conn, admin, tmpl, migrate); err != nil {
		t.Fatalf("pgtest: template: %v", err)
	}
	name := "shipfile_test_" + randomHex(6)
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl)); err != nil {
		t.Fatalf("pgtest: create %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
		}
	})
	return withDatabase(admin, name)
}

func ensureTemplate(ctx context.Context, conn *pgx.Conn, admin, tmpl string, migrate Migrate) error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", tmpl).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	// Build under a temporary name and rename when complete, so a crash mid-migration
	// never leaves a half-built template behind under the real name.
	building := tmpl + "_building"
	if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", building)); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return err
	}
	if err := migrate(ctx, withDatabase(admin, building)); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	_, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, tmpl))
	return err
}

func withDatabase(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Path = "/" + name
	return u.String()
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
