package linksdb_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
	"github.com/shipfile/shipfile/services/gateway/internal/store/linksdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/storetest"
)

// TestPackageByLinkMapsThePackage: the package a link opens is the package the
// packages' store reads (linksdb maps the package's row with its own toPackage), with
// the link's recipient and nothing of the other recipients; an unknown link is
// ErrNotFound.
func TestPackageByLinkMapsThePackage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	owner := storetest.InsertUser(t, pool, "o@example.com", "O")
	packages := store.NewPostgres(pool)
	links := linksdb.NewStore(sqldb.NewDB(pool))

	now := time.Now().Truncate(time.Microsecond)
	maxDownloads := 3
	p := storetest.DraftPackage(owner, now)
	p.RecipientName, p.Note, p.PasswordHash, p.MaxDownloads, p.NotifyOwner = "R", "a note", "$argon2id$hash", &maxDownloads, true
	hashes := [][]byte{hash("first"), hash("second")}
	for i, h := range hashes {
		p.Recipients = append(p.Recipients, app.Recipient{
			ID: uuid.New(), Email: []string{"r1@example.com", "r2@example.com"}[i], Name: "R", Language: "de",
			LinkHash: h, LinkState: app.LinkActive, CreatedAt: now,
		})
	}
	if err := packages.CreatePackage(ctx, p, app.Effects{}); err != nil {
		t.Fatal(err)
	}
	want, err := packages.GetPackage(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}

	got, err := links.PackageByLink(ctx, hashes[1])
	if err != nil {
		t.Fatal(err)
	}
	if got.Link == nil || !reflect.DeepEqual(*got.Link, want.Recipients[1]) {
		t.Fatalf("link's recipient = %+v, want %+v", got.Link, want.Recipients[1])
	}
	if string(got.LinkHash) != string(hashes[1]) || got.Recipients != nil || got.UsedUp {
		t.Fatalf("link hash %x, recipients %v, used up %v; want the second link's hash, none, false", got.LinkHash, got.Recipients, got.UsedUp)
	}
	got.Link, got.LinkHash = nil, nil
	want.Recipients = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("package through the link:\n%+v\nwant the packages' store's:\n%+v", got, want)
	}

	if _, err := links.PackageByLink(ctx, hash("unknown")); !errors.Is(err, app.ErrNotFound) {
		t.Fatalf("unknown link: %v, want ErrNotFound", err)
	}
}

func hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}
