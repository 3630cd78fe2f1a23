// Package expirytest gives the expiry service's tests packages, files and objects to
// expire: rows written straight into the gateway's schema and objects put into a real
// bucket, and ways to look at what is left.
package expirytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
)

// Spec describes a package to insert.
type Spec struct {
	State     string        // draft, active, revoked or expired (default active)
	Direction string        // default outbound
	ExpiresIn time.Duration // expires_at = now() + ExpiresIn; negative for overdue
	Files     int           // files, each with an object key
}

// Package is an inserted package.
type Package struct {
	ID    string
	Title string
	Keys  []string // its files' object keys
}

// User inserts a regular user and returns its id.
func User(t testing.TB, pool *pgxpool.Pool) int64 {
	t.Helper()
	var id int64
	email := "owner-" + strings.ToLower(rand.Text()[:10]) + "@example.com"
	if err := pool.QueryRow(context.Background(),
		`INSERT INTO users (email, name, role) VALUES ($1, 'Owner', 'regular') RETURNING id`, email).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// Insert writes the packages and their files in one transaction and returns them in
// the order of specs. Active and revoked packages get a link hash, as finalized ones do.
func Insert(t testing.TB, pool *pgxpool.Pool, owner int64, specs ...Spec) []Package {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := make([]Package, len(specs))
	b := &pgx.Batch{}
	for i, s := range specs {
		if s.State == "" {
			s.State = "active"
		}
		if s.Direction == "" {
			s.Direction = "outbound"
		}
		id := uuid.Must(uuid.NewV7())
		p := Package{ID: id.String(), Title: fmt.Sprintf("package %d", i)}
		var link []byte
		if s.State == "active" || s.State == "revoked" {
			link = make([]byte, 32)
			_, _ = rand.Read(link)
		}
		total := int64(5 * s.Files) // every object is "hello"
		b.Queue(`INSERT INTO packages (id, owner_user_id, title, recipient_email, direction, state, ttl_days,
				file_count, total_size, expires_at, finalized_at)
			VALUES ($1, $2, $3, 'bob@example.com', $4, $5, 7, $6, $7,
				now() + $8 * interval '1 microsecond', CASE WHEN $5 = 'draft' THEN NULL ELSE now() END)`,
			id, owner, p.Title, s.Direction, s.State, s.Files, total, s.ExpiresIn.Microseconds())
		// The package's one recipient and link (gateway migration 00019).
		b.Queue(`INSERT INTO recipients (id, package_id, position, email, link_hash, link_state)
			VALUES ($1, $2, 0, 'bob@example.com', $3, CASE WHEN $3::bytea IS NULL THEN 'none' WHEN $4 = 'revoked' THEN 'revoked' ELSE 'active' END)`,
			uuid.Must(uuid.NewV7()), id, link, s.State)
		for range s.Files {
			fid := uuid.Must(uuid.NewV7())
			key := "packages/" + id.String() + "/" + fid.String()
			p.Keys = append(p.Keys, key)
			b.Queue(`INSERT INTO files (id, package_id, filename, size, content_type, sha256, object_key, uploaded_by)
				VALUES ($1, $2, $3, 5, 'text/plain', $4, $5, 'owner')`,
				fid, id, "file-"+fid.String()[:8]+".txt", strings.Repeat("0", 64), key)
		}
		out[i] = p
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() }); err != nil {
		t.Fatal(err)
	}
	return out
}

// Keys returns every object key of ps.
func Keys(ps []Package) []string {
	var keys []string
	for _, p := range ps {
		keys = append(keys, p.Keys...)
	}
	return keys
}

// Bucket opens a fresh bucket on m.
func Bucket(t testing.TB, m *servicetest.MinIO) *storage.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := storage.Open(ctx, storage.Config{
		Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey,
		Bucket: "expiry-" + strings.ToLower(rand.Text()[:12]),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Put stores a small object under each key, a few at a time.
func Put(t testing.TB, s *storage.Store, keys []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	work := make(chan string)
	errs := make(chan error, len(keys))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for k := range work {
				_, err := s.Client.PutObject(ctx, s.Bucket, k, bytes.NewReader([]byte("hello")), 5, minio.PutObjectOptions{ContentType: "text/plain"})
				if err != nil {
					errs <- fmt.Errorf("put %s: %w", k, err)
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Objects lists the keys of the objects in the bucket.
func Objects(t testing.TB, s *storage.Store) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var keys []string
	for o := range s.Client.ListObjects(ctx, s.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list objects: %v", o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// Count runs a count query.
func Count(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// States returns the state of each package by id.
func States(t testing.TB, pool *pgxpool.Pool, ps []Package) map[string]string {
	t.Helper()
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	rows, err := pool.Query(context.Background(), `SELECT id::text, state FROM packages WHERE id = ANY($1::uuid[])`, ids)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var id, state string
	if _, err := pgx.ForEachRow(rows, []any{&id, &state}, func() error { out[id] = state; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}
