package main

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/database"
)

// expiryRow: -expiry-packages overdue packages (drafts, actives and revoked ones, each
// with one small file whose object is in the bucket) are written straight into the
// database and MinIO; then one expiry process starts (SHIPFILE_EXPIRY_INTERVAL=1s) and
// the row measures the time from its start until every package is expired, and until
// every object is deleted.
func expiryRow(ctx context.Context, t testing.TB, c config, bins rig.Bins, rep *Report) {
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	pool, err := database.Open(ctx, s.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	n := c.expiryPackages

	setup := time.Now()
	if _, err := pool.Exec(ctx, `
		INSERT INTO packages (id, owner_user_id, title, recipient_email, direction, state, ttl_days, created_at, expires_at,
			finalized_at, file_count, total_size)
		SELECT gen_random_uuid(), (SELECT min(id) FROM users), 'overdue ' || i, 'recipient@example.com',
			'outbound', (ARRAY['draft', 'active', 'revoked'])[1 + i % 3], 1, now() - interval '2 days',
			now() - interval '1 day' - i * interval '1 millisecond', CASE WHEN i % 3 > 0 THEN now() - interval '2 days' END, 1, 64
		FROM generate_series(1, $1) AS i`, n); err != nil {
		t.Fatalf("insert packages: %v", err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO files (id, package_id, filename, size, content_type, sha256, object_key, uploaded_by)
		SELECT fid, pid, 'small.txt', 64, 'text/plain', repeat('0', 64), 'packages/' || pid || '/' || fid, 'owner'
		FROM (SELECT gen_random_uuid() AS fid, id AS pid FROM packages) x`); err != nil {
		t.Fatalf("insert files: %v", err)
	}
	rows, err := pool.Query(ctx, `SELECT object_key FROM files`)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	rowsTook := time.Since(setup)
	if err := putSmallObjects(ctx, s, keys); err != nil {
		t.Fatalf("put %d objects: %v", len(keys), err)
	}
	if got := len(s.ObjectKeys()); got != n {
		t.Fatalf("the bucket holds %d objects after the set-up, want %d", got, n)
	}
	rep.Rawf("expiry: set up %d overdue packages (rows in %s) with one 64-byte object each in %s", n,
		rowsTook.Round(100*time.Millisecond), time.Since(setup).Round(100*time.Millisecond))

	start := time.Now()
	exp := s.StartService("expiry", "SHIPFILE_EXPIRY_INTERVAL=1s")
	prof.record(ctx, exp, min(30*time.Second, c.expiryTarget), "expiry")
	var expiredAt, deletedAt time.Duration
	limit := 2 * c.expiryTarget
	for time.Since(start) < limit && ctx.Err() == nil {
		var left, queued int
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM packages WHERE state <> 'expired'),
			(SELECT count(*) FROM object_deletions)`).Scan(&left, &queued); err != nil {
			t.Fatal(err)
		}
		if left == 0 && expiredAt == 0 {
			expiredAt = time.Since(start)
		}
		if left == 0 && queued == 0 {
			deletedAt = time.Since(start)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The wait ends at the limit, or earlier when the group's budget runs out.
	waited := min(time.Since(start), limit)
	var left int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM packages WHERE state <> 'expired'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	remaining := 0
	if deletedAt > 0 {
		remaining = len(s.ObjectKeys())
	}
	rep.Rawf("expiry: %d of %d packages expired %s after the expiry process started; queued objects deleted after %s; %d objects left in the bucket",
		n-left, n, orNot(expiredAt), orNot(deletedAt), remaining)
	rep.Add(Row{
		What:     fmt.Sprintf("expiry: %d overdue packages with one object each", n),
		Measured: fmt.Sprintf("all expired in %s, objects deleted in %s", orNot(expiredAt), orNot(deletedAt)),
		Target:   fmt.Sprintf("all expired in ≤ %s", c.expiryTarget),
		Verdict: verdict(expiredAt > 0 && expiredAt <= c.expiryTarget && remaining == 0,
			"%d not expired after %s; expired after %s; %d objects left", left, waited.Round(100*time.Millisecond), orNot(expiredAt), remaining),
	})
}

func orNot(d time.Duration) string {
	if d == 0 {
		return "(not within the limit)"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// putSmallObjects stores a 64-byte object under each key. The objects go in tar
// archives that MinIO unpacks itself (minio-go's PutObjectsSnowball), batch at a time
// and two batches at once: a PUT per object would take minutes for 100,000.
func putSmallObjects(ctx context.Context, s *rig.Stack, keys []string) error {
	const batch = 10000
	body := bytes.Repeat([]byte("x"), 64)
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for start := 0; start < len(keys); start += batch {
		part := keys[start:min(start+batch, len(keys))]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			objs := make(chan minio.SnowballObject, 100)
			go func() {
				defer close(objs)
				for _, k := range part {
					objs <- minio.SnowballObject{Key: k, Size: int64(len(body)), Content: bytes.NewReader(body)}
				}
			}()
			err := s.Objects.Client.PutObjectsSnowball(ctx, s.Objects.Bucket, minio.SnowballOptions{InMemory: true}, objs)
			if err != nil {
				once.Do(func() { first = err })
				for range objs {
				}
			}
		})
	}
	wg.Wait()
	return first
}
