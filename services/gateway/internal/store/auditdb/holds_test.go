package auditdb_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
	"github.com/shipfile/shipfile/services/gateway/internal/app/previews"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
	"github.com/shipfile/shipfile/services/gateway/internal/store/auditdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/previewsdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/storetest"
)

// lockedBucket makes a bucket with object locking on the test MinIO, removed (every
// version) at the end.
func lockedBucket(t *testing.T) *storage.Store {
	t.Helper()
	var cfg storage.Config
	if err := config.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Bucket = "lock-" + strings.ToLower(rand.Text()[:16])
	cfg.ObjectLock = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := storage.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("MinIO at %s: %v", cfg.Endpoint, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		off := minio.LegalHoldDisabled
		for obj := range s.Client.ListObjects(ctx, s.Bucket, minio.ListObjectsOptions{Recursive: true, WithVersions: true}) {
			_ = s.Client.PutObjectLegalHold(ctx, s.Bucket, obj.Key, minio.PutObjectLegalHoldOptions{VersionID: obj.VersionID, Status: &off})
			_ = s.Client.RemoveObject(ctx, s.Bucket, obj.Key, minio.RemoveObjectOptions{VersionID: obj.VersionID})
		}
		_ = s.Client.RemoveBucket(ctx, s.Bucket)
	})
	return s
}

// storedFile is a file row of a package, with its object stored in the bucket.
func storedFile(t *testing.T, ctx context.Context, pool *pgxpool.Pool, bucket *storage.Store, pkg uuid.UUID, name, contentType string, data []byte) (uuid.UUID, string) {
	t.Helper()
	id := uuid.New()
	key := "packages/" + pkg.String() + "/" + id.String()
	if _, err := bucket.Client.PutObject(ctx, bucket.Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{ContentType: contentType}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO files (id, package_id, filename, size, content_type, sha256, object_key, uploaded_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'owner')`, id, pkg, name, len(data), contentType, strings.Repeat("0", 64), key); err != nil {
		t.Fatal(err)
	}
	return id, key
}

// pngImage is a small PNG, enough for a preview.
func pngImage(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 6))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestLegalHoldLocksObjects: with object lock, placing a hold puts S3's legal hold on
// each object of the package, each file's and its preview's (made before the hold, or
// while it lasts), so that neither the gateway's removal nor a direct S3 delete of the
// object's version goes through; releasing the hold lifts it from all of them, and the
// gateway's removal then leaves no version of any behind.
func TestLegalHoldLocksObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	bucket := lockedBucket(t)
	objects := store.NewObjects(bucket, 5<<20)
	db := store.NewPostgres(pool)
	owner := storetest.InsertUser(t, pool, "o@example.com", "O")
	p := storetest.DraftPackage(owner, time.Now())
	if err := db.CreatePackage(ctx, p, app.Effects{}); err != nil {
		t.Fatal(err)
	}
	_, key := storedFile(t, ctx, pool, bucket, p.ID, "a.txt", "text/plain", []byte("evidence"))
	img := pngImage(t)
	before, beforeKey := storedFile(t, ctx, pool, bucket, p.ID, "before.png", "image/png", img)
	after, afterKey := storedFile(t, ctx, pool, bucket, p.ID, "after.png", "image/png", img)
	maker := previews.New(previewsdb.NewStore(sqldb.NewDB(pool)), objects, previews.Options{Scan: app.ScanOff, Locker: objects})
	if err := maker.Make(ctx, before); err != nil {
		t.Fatal(err)
	}

	holds := audit.NewHolds(auditdb.NewStore(sqldb.NewDB(pool)), objects, nil)
	admin := app.User{ID: owner, Role: app.RoleAdmin}
	h, err := holds.Place(ctx, admin, app.Client{}, audit.NewHold{PackageID: &p.ID, Reason: "case 7"})
	if err != nil {
		t.Fatal(err)
	}
	if err := maker.Make(ctx, after); err != nil {
		t.Fatal(err)
	}
	keys := []string{key, beforeKey, previews.Key(beforeKey), afterKey, previews.Key(afterKey)}
	for _, k := range keys {
		status, err := bucket.Client.GetObjectLegalHold(ctx, bucket.Bucket, k, minio.GetObjectLegalHoldOptions{})
		if err != nil || status == nil || *status != minio.LegalHoldEnabled {
			t.Fatalf("S3 legal hold of %s while the package is held: %v, %v", k, status, err)
		}
		info, err := bucket.Client.StatObject(ctx, bucket.Bucket, k, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := bucket.Client.RemoveObject(ctx, bucket.Bucket, k, minio.RemoveObjectOptions{VersionID: info.VersionID}); err == nil {
			t.Fatalf("a direct S3 delete of the held %s went through", k)
		}
		if err := objects.Remove(ctx, k); err == nil {
			t.Fatalf("the gateway's removal of the held %s went through", k)
		}
		if _, err := bucket.Client.StatObject(ctx, bucket.Bucket, k, minio.StatObjectOptions{VersionID: info.VersionID}); err != nil {
			t.Fatalf("the held %s after the refused deletes: %v", k, err)
		}
	}

	if _, err := holds.Release(ctx, admin, app.Client{}, h.ID); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		status, err := bucket.Client.GetObjectLegalHold(ctx, bucket.Bucket, k, minio.GetObjectLegalHoldOptions{})
		if err != nil || status == nil || *status != minio.LegalHoldDisabled {
			t.Fatalf("S3 legal hold of %s after the release: %v, %v", k, status, err)
		}
		if err := objects.Remove(ctx, k); err != nil {
			t.Fatalf("the removal of %s after the release: %v", k, err)
		}
		versions, err := bucket.Versions(ctx, k)
		if err != nil || len(versions) != 0 {
			t.Fatalf("versions of %s after its removal: %d, %v; want none", k, len(versions), err)
		}
	}
}
