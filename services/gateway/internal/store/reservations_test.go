package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
)

// TestAddFileCommitsTheReservation: AddFile ends the object key's reservation in its
// transaction; without a reservation (the orphan sweep took it, and the object) the
// file row is not written.
func TestAddFileCommitsTheReservation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	owner := insertUser(t, pool, "o@example.com", "O")
	db := store.NewPostgres(pool)
	now := time.Now()
	pkg := draftPackage(owner, now)
	if err := db.CreatePackage(ctx, pkg, app.Effects{}); err != nil {
		t.Fatal(err)
	}
	file := func() app.File {
		id := uuid.New()
		return app.File{ID: id, PackageID: pkg.ID, Filename: "f", ContentType: "text/plain", SHA256: "00",
			ObjectKey: "packages/" + pkg.ID.String() + "/" + id.String(), UploadedBy: app.ByOwner, CreatedAt: now}
	}
	count := func(table string) int {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	noChange := func(*app.Package) (app.Effects, error) { return app.Effects{}, nil }

	unreserved := file()
	if _, err := db.AddFile(ctx, unreserved, noChange); !errors.Is(err, app.ErrConflict) {
		t.Fatalf("AddFile without a reservation: %v, want a conflict", err)
	}
	if count("files") != 0 {
		t.Fatal("a file row was written without its reservation")
	}

	f := file()
	for range 2 { // renewing is reserving again
		if err := db.ReserveObjectKey(ctx, f.ObjectKey); err != nil {
			t.Fatal(err)
		}
	}
	if count("object_reservations") != 1 {
		t.Fatalf("%d reservations, want 1", count("object_reservations"))
	}
	if _, err := db.AddFile(ctx, f, noChange); err != nil {
		t.Fatal(err)
	}
	if count("files") != 1 || count("object_reservations") != 0 {
		t.Fatalf("after AddFile: %d files, %d reservations; want 1, 0", count("files"), count("object_reservations"))
	}
}
