package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// queuedDeletions returns the object keys queued in object_deletions.
func (a *testAPI) queuedDeletions() []string {
	a.t.Helper()
	rows, err := a.pool.Query(context.Background(), `SELECT object_key FROM object_deletions ORDER BY object_key`)
	if err != nil {
		a.t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			a.t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

// TestFailedUploadQueuesItsObject: an upload whose bytes the store took but whose file
// row is not written (its package is deleted while the commit waits on the package's
// row) and whose object the gateway cannot remove (the store went down in between)
// leaves its key queued in object_deletions, so the expiry service removes the object
// at its first pass once the store is back, not the orphan sweep after
// SHIPFILE_ORPHAN_GRACE; the key's reservation stays as the last resort. An upload the
// store fails outright queues its key too (a write whose answer was lost may have
// landed). With the store up, a failed upload's object is removed at once and nothing
// is queued.
func TestFailedUploadQueuesItsObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := servicetest.StartMinIO(t)
	objects, err := storage.Open(ctx, storage.Config{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey, Bucket: "uploads"})
	if err != nil {
		t.Fatal(err)
	}
	a := newTestAPI(t, defaultConfig(), onObjects(objects))
	_, token := a.user("owner@example.com", app.RoleRegular)
	draft := func() string {
		return a.createPackage(token, map[string]any{"title": "a draft", "recipient_email": "r@example.com"})["id"].(string)
	}
	// commitWaits uploads to package id while a transaction holds the package's row,
	// and returns once the store has the object and the commit waits on the row.
	commitWaits := func(id string) (key string, tx func(sql string), answer <-chan response) {
		t.Helper()
		hold, err := a.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hold.Rollback(ctx) })
		if _, err := hold.Exec(ctx, `SELECT 1 FROM packages WHERE id = $1 FOR UPDATE`, id); err != nil {
			t.Fatal(err)
		}
		before := a.objectKeys()
		done := make(chan response, 1)
		go func() {
			done <- a.upload("/api/v1/packages/"+id+"/files", token, "report.txt", []byte("the quarterly report"))
		}()
		servicetest.WaitFor(t, 20*time.Second, "the object stored", func() bool { return len(a.objectKeys()) > len(before) })
		servicetest.WaitFor(t, 20*time.Second, "the commit waiting on the package's row", func() bool {
			var n int
			_ = a.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
			return n > 0
		})
		for _, k := range a.objectKeys() {
			if !slices.Contains(before, k) {
				key = k
			}
		}
		return key, func(sql string) {
			t.Helper()
			if _, err := hold.Exec(ctx, sql, id); err != nil {
				t.Fatal(err)
			}
			if err := hold.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}, done
	}

	// The store up: the object is removed at once, nothing queued.
	key, release, answer := commitWaits(draft())
	release(`DELETE FROM packages WHERE id = $1`)
	expect(t, <-answer, http.StatusNotFound)
	if slices.Contains(a.objectKeys(), key) || len(a.queuedDeletions()) != 0 {
		t.Fatalf("with the store up: objects %v, queued %v; want %s removed and nothing queued", a.objectKeys(), a.queuedDeletions(), key)
	}

	// The store down once the bytes are in: the key is queued, its reservation kept.
	key, release, answer = commitWaits(draft())
	m.Stop()
	release(`DELETE FROM packages WHERE id = $1`)
	select {
	case r := <-answer:
		if r.status < 400 {
			t.Fatalf("the failed upload answered %d %s", r.status, r.body)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("no answer to the failed upload")
	}
	if q := a.queuedDeletions(); !slices.Equal(q, []string{key}) {
		t.Fatalf("queued deletions = %v, want the object the store kept, %s", q, key)
	}
	if !slices.Contains(a.reservations(), key) {
		t.Fatalf("reservations = %v, want %s kept", a.reservations(), key)
	}
	m.Start()
	// Only the queue (worked off by the expiry service) removes it now.
	if !slices.Contains(a.objectKeys(), key) {
		t.Fatalf("the object %s is gone before the queue was worked off: the test shows nothing", key)
	}

	// The store down before the upload: the write fails, and its key is queued.
	if _, err := a.pool.Exec(ctx, `DELETE FROM object_deletions`); err != nil {
		t.Fatal(err)
	}
	id := draft()
	m.Stop()
	r := a.upload("/api/v1/packages/"+id+"/files", token, "report.txt", []byte("the quarterly report"))
	expect(t, r, http.StatusServiceUnavailable)
	m.Start()
	var queued, files int
	if err := a.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM object_deletions WHERE object_key LIKE 'packages/' || $1 || '/%'), (SELECT count(*) FROM files)`, id).Scan(&queued, &files); err != nil {
		t.Fatal(err)
	}
	if queued != 1 || files != 0 {
		t.Fatalf("after a write the store failed: %d keys of the package queued, %d file rows; want 1 and 0", queued, files)
	}
}
