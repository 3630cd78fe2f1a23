// Package migrations holds the gateway's embedded schema migrations and applies them
// with goose. The gateway owns the schema; other services only read and write it.
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// Up applies every pending migration to the database at url. A PostgreSQL advisory
// lock lets several gateway instances start at once.
func Up(ctx context.Context, url string) error {
	db, err := open(url)
	if err != nil {
		return err
	}
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	// Out of order: numbers are handed to branches worked on side by side, so a
	// database may have applied 00010 before 00009 lands; each migration stands alone.
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSessionLocker(locker), goose.WithAllowOutofOrder(true))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// UpTo applies the pending migrations up to and including version, for tests that
// need a database as an older gateway left it (e.g. to check a data migration).
func UpTo(ctx context.Context, url string, version int64) error {
	db, err := open(url)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithAllowOutofOrder(true))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// Version is a short hash of every migration file, naming test template databases so a
// changed schema gets a new template.
func Version() string {
	h := sha256.New()
	_ = fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(path)
		if err != nil {
			return err
		}
		h.Write([]byte(path))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// open opens url through database/sql for goose. The URL is the services' pool URL,
// which may carry pgxpool's own settings (pool_max_conns…): they are taken out here
// as the pool takes them out, else PostgreSQL refuses them as unknown parameters.
func open(url string) (*sql.DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return stdlib.OpenDB(*cfg.ConnConfig), nil
}
