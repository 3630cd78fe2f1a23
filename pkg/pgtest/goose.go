package pgtest

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
)

// The helpers below give a service's tests a database with a schema that another part
// of the repository owns (the gateway's migrations), without importing that code: they
// read the goose migration files from a directory and apply each one's "-- +goose Up"
// section in filename order to a template database named after a hash of the files.

// Migration is one goose migration file.
type Migration struct {
	Name string // file name, e.g. 00004_webhooks.sql
	Up   string // its "-- +goose Up" section
	// NoTx: the file says "-- +goose NO TRANSACTION" (e.g. CREATE INDEX CONCURRENTLY,
	// which no transaction block may hold): its statements run one by one.
	NoTx bool
	raw  []byte
}

// FindDir finds the directory rel (slash-separated, relative to the repository root) from
// the working directory (a test's package directory) upwards, then from this source
// file's location. An absolute path is taken as it is.
func FindDir(rel string) (string, error) {
	if filepath.IsAbs(rel) {
		return rel, nil
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, start := range starts {
		for dir := start; ; dir = filepath.Dir(dir) {
			cand := filepath.Join(dir, filepath.FromSlash(rel))
			if fi, err := os.Stat(cand); err == nil && fi.IsDir() {
				return cand, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", fmt.Errorf("pgtest: %s not found above %v", rel, starts)
}

// LoadGoose reads the goose migration files of the directory rel (see FindDir) in
// filename order.
func LoadGoose(rel string) ([]Migration, error) {
	dir, err := FindDir(rel)
	if err != nil {
		return nil, err
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("pgtest: no migrations in %s", dir)
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
			return nil, fmt.Errorf("pgtest: %s: %w", filepath.Base(name), err)
		}
		noTx := slices.ContainsFunc(strings.Split(string(b), "\n"), func(l string) bool {
			return strings.TrimSpace(l) == "-- +goose NO TRANSACTION"
		})
		out = append(out, Migration{Name: filepath.Base(name), Up: up, NoTx: noTx, raw: b})
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

// GooseVersion names a template database: a short hash of the files' names and contents.
func GooseVersion(ms []Migration) string {
	h := sha256.New()
	for _, m := range ms {
		h.Write([]byte(m.Name))
		h.Write(m.raw)
	}
	return "goose_" + hex.EncodeToString(h.Sum(nil))[:16]
}

// ApplyGoose runs every migration's Up section on the database at url.
func ApplyGoose(ctx context.Context, url string, ms []Migration) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, m := range ms {
		// Without arguments pgx uses the simple protocol: several statements at once,
		// in one implicit transaction; a migration without one runs them one by one.
		stmts := []string{m.Up}
		if m.NoTx {
			stmts = Statements(m.Up)
		}
		for _, stmt := range stmts {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
		}
	}
	return nil
}

// Statements splits a migration's section into its statements as goose does without
// StatementBegin: a statement ends with a line that ends with a semicolon (comment
// lines aside).
func Statements(section string) []string {
	var (
		out []string
		b   strings.Builder
	)
	for line := range strings.Lines(section) {
		b.WriteString(line)
		l := strings.TrimSpace(line)
		if !strings.HasPrefix(l, "--") && strings.HasSuffix(l, ";") {
			out = append(out, b.String())
			b.Reset()
		}
	}
	if strings.TrimSpace(b.String()) != "" {
		out = append(out, b.String())
	}
	return out
}

// NewGoose returns the URL of a fresh database with the schema of the goose migrations in
// rel (see FindDir), dropped when the test ends.
func NewGoose(t testing.TB, rel string) string {
	t.Helper()
	ms, err := LoadGoose(rel)
	if err != nil {
		t.Fatal(err)
	}
	return New(t, GooseVersion(ms), func(ctx context.Context, url string) error { return ApplyGoose(ctx, url, ms) })
}

// PoolGoose is NewGoose with a pool on the new database, closed when the test ends.
func PoolGoose(t testing.TB, rel string) (*pgxpool.Pool, string) {
	t.Helper()
	url := NewGoose(t, rel)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, url
}
