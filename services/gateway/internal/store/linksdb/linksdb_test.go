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
// packages' store reads (both map the package's row with packagerow.ToPackage), with
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
	// Every column a draft leaves empty gets a value, so that both mappings are compared
	// on every field.
	if _, err := pool.Exec(ctx, `UPDATE packages SET state = 'revoked', file_count = 2, total_size = 1234, file_seq = 2,
		finalized_at = $2, revoked_at = $2, on_hold = true, direction = 'inbound', encryption = 'age', public_key = 'age1example' WHERE id = $1`, p.ID, now); err != nil {
		t.Fatal(err)
	}
	want, err := packages.GetPackage(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The comparison below catches a field one mapping leaves out only when the package
	// has a value for it: a field added to the package fails here until the fixture sets it.
	if zero := zeroFields(reflect.ValueOf(want), ""); !reflect.DeepEqual(zero, unsetInFixture) {
		t.Fatalf("fields the fixture leaves unset: %v, want exactly %v (give a new field a value above)", zero, unsetInFixture)
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

// unsetInFixture are the fields the packages' store leaves empty: what only a package
// read through a link has.
var unsetInFixture = []string{"LinkHash", "Link", "LinkUseCount", "LinkLastUsedAt", "UsedUp"}

// zeroFields lists the fields of the struct v (those of embedded structs by their own
// names) that hold their zero value.
func zeroFields(v reflect.Value, prefix string) []string {
	var out []string
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, zeroFields(v.Field(i), prefix)...)
			continue
		}
		if v.Field(i).IsZero() {
			out = append(out, prefix+f.Name)
		}
	}
	return out
}
