// Package schematest gives the mailer's tests a PostgreSQL database with the
// gateway's schema. The gateway owns the schema and services never import each other,
// so it reads the gateway's migration files (services/gateway/migrations/*.sql) and
// applies each one's "-- +goose Up" section in filename order to a template database
// named after a hash of those files (pkg/pgtest clones it for every test).
package schematest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/pgtest"
)

// migrationsRel is the gateway's migration directory relative to the repository root.
const migrationsRel = "services/gateway/migrations"

// Migration is one migration file.
type Migration struct {
	Name string // file name, e.g. 00004_webhooks.sql
	Up   string // its "-- +goose Up" section
	raw  []byte
}

// Dir finds the gateway's migration directory: from the working directory (a test's
// package directory) upwards, then from this source file's location.
func Dir() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, start := range starts {
		for dir := start; ; dir = filepath.Dir(dir) {
			cand := filepath.Join(dir, filepath.FromSlash(migrationsRel))
			if fi, err := os.Stat(cand); err == nil && fi.IsDir() {
				return cand, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", fmt.Errorf("schematest: %s not found above %v", migrationsRel, starts)
}

// Load reads the migration files in filename order.
func Load() ([]Migration, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("schematest: no migrations in %s", dir)
	}
	slices.Sort(names)
	out := make([]Migration, 0, len(names))
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		up, err := UpSection(string(b))
		if err != nil {
			return nil, fmt.Errorf("schematest: %s: %w", filepath.Base(name), err)
		}
		out = append(out, Migration{Name: filepath.Base(name), Up: up, raw: b})
	}
	return out, nil
}

// UpSection returns the part of a goose migration between "-- +goose Up" and
// "-- +goose Down" (or the end).
func UpSection(src string) (string, error) {
	var (
		b    strings.Builder
		inUp bool
		seen bool
	)
	for line := range strings.Lines(src) {
		switch strings.TrimSpace(line) {
		case "-- +goose Up":
			inUp, seen = true, true
			continue
		case "-- +goose Down":
			inUp = false
			continue
		case "-- +goose StatementBegin", "-- +goose StatementEnd":
			continue // the whole section goes in one simple-protocol Exec
		}
		if inUp {
			b.WriteString(line)
		}
	}
	if !seen {
		return "", errors.New("no -- +goose Up section")
	}
	return b.String(), nil
}

// Version names the template database: a short hash of the files' names and contents.
func Version(ms []Migration) string {
	h := sha256.New()
	for _, m := range ms {
		h.Write([]byte(m.Name))
		h.Write(m.raw)
	}
	return "mailer_" + hex.EncodeToString(h.Sum(nil))[:16]
}

// Apply runs every migration's Up section on the database at url.
func Apply(ctx context.Context, url string, ms []Migration) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, m := range ms {
		// Without arguments pgx uses the simple protocol: several statements at once.
		if _, err := conn.Exec(ctx, m.Up); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
	}
	return nil
}

// New returns the URL of a fresh database with the gateway's schema, dropped when the
// test ends.
func New(t testing.TB) string {
	t.Helper()
	ms, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return pgtest.New(t, Version(ms), func(ctx context.Context, url string) error { return Apply(ctx, url, ms) })
}

// Pool returns a pool on a fresh database with the gateway's schema, closed when the
// test ends.
func Pool(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	url := New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, url
}
