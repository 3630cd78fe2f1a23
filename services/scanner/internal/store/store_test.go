package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/services/scanner/internal/app"
	"github.com/shipfile/shipfile/services/scanner/internal/store"
)

// Two instances racing to record a verdict of one file: one verdict, one audit entry,
// one event, one owner notification; a failure counted after it counts nothing.
func TestRecordOnce(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	ctx := context.Background()
	var owner int64
	if err := pool.QueryRow(ctx, `INSERT INTO users (email, name, role) VALUES ('o@example.com', 'O', 'regular') RETURNING id`).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	pkg, fileID := uuid.NewString(), uuid.NewString()
	if _, err := pool.Exec(ctx, `INSERT INTO packages (id, owner_user_id, title, recipient_email, direction, state, ttl_days, expires_at)
		VALUES ($1, $2, 'T', 'r@example.com', 'inbound', 'active', 7, now() + interval '7 days')`, pkg, owner); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO files (id, package_id, filename, size, content_type, sha256, object_key, uploaded_by)
		VALUES ($1, $2, 'evil.exe', 68, 'application/octet-stream', repeat('0', 64), $3, 'recipient')`, fileID, pkg, "k/"+fileID); err != nil {
		t.Fatal(err)
	}
	s := store.New(pool, nil)
	f, err := s.File(ctx, fileID)
	if err != nil || f.Scan != app.ScanPending || f.Package.OwnerUserID != owner || f.Package.Direction != "inbound" || f.Package.ID != f.PackageID {
		t.Fatalf("File: %+v, %v", f, err)
	}
	if n, err := s.CountFailure(ctx, fileID); err != nil || n != 1 {
		t.Fatalf("first failure: %d, %v", n, err)
	}

	var wg sync.WaitGroup
	recorded := make([]bool, 8)
	for i := range recorded {
		wg.Go(func() {
			fx := app.InfectedEffects(f, "Eicar-Test-Signature", time.Now())
			ok, err := s.Record(ctx, f, app.Verdict{FileID: fileID, Scan: app.ScanInfected, Signature: "Eicar-Test-Signature"}, fx)
			if err != nil {
				t.Error(err)
			}
			recorded[i] = ok
		})
	}
	wg.Wait()
	n := 0
	for _, ok := range recorded {
		if ok {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d instances recorded a verdict, want 1", n)
	}
	count := func(q string) int {
		var c int
		if err := pool.QueryRow(ctx, q, fileID).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := count(`SELECT count(*) FROM audit_log WHERE file_id = $1 AND action = 'file.infected' AND detail LIKE '%Eicar-Test-Signature%'`); c != 1 {
		t.Errorf("%d audit entries", c)
	}
	if c := count(`SELECT count(*) FROM outbox WHERE subject = 'shipfile.events.package.file_infected' AND position(convert_to($1, 'UTF8') in payload) > 0`); c != 1 {
		t.Errorf("%d events", c)
	}
	if c := count(`SELECT count(*) FROM owner_notifications WHERE file_id = $1 AND kind = 'infected' AND signature = 'Eicar-Test-Signature' AND filename = 'evil.exe'`); c != 1 {
		t.Errorf("%d owner notifications", c)
	}
	if c := count(`SELECT count(*) FROM files WHERE id = $1 AND scan = 'infected' AND scan_signature = 'Eicar-Test-Signature' AND scanned_at IS NOT NULL`); c != 1 {
		t.Error("the file's scan fields")
	}
	if n, err := s.CountFailure(ctx, fileID); err != nil || n != 0 {
		t.Errorf("failure after the verdict: %d, %v", n, err)
	}
	if _, err := s.File(ctx, uuid.NewString()); err != app.ErrNotFound {
		t.Errorf("unknown file: %v", err)
	}
}
