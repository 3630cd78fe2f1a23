package auditdb_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
	"github.com/shipfile/shipfile/services/gateway/internal/store/auditdb"
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

// TestLegalHoldLocksObjects: with object lock, placing a hold puts S3's legal hold on
// each object of the package, so a direct S3 delete of the object (its version) fails;
// releasing the hold lifts it and the delete goes through.
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
	key := "packages/" + p.ID.String() + "/" + uuid.NewString()
	info, err := bucket.Client.PutObject(ctx, bucket.Bucket, key, bytes.NewReader([]byte("evidence")), 8, minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO files (id, package_id, filename, size, content_type, sha256, object_key, uploaded_by)
		VALUES ($1, $2, 'a.txt', 8, 'text/plain', $3, $4, 'owner')`, uuid.New(), p.ID, strings.Repeat("0", 64), key); err != nil {
		t.Fatal(err)
	}

	holds := audit.NewHolds(auditdb.NewStore(sqldb.NewDB(pool)), objects, nil)
	admin := app.User{ID: owner, Role: app.RoleAdmin}
	h, err := holds.Place(ctx, admin, app.Client{}, audit.NewHold{PackageID: &p.ID, Reason: "case 7"})
	if err != nil {
		t.Fatal(err)
	}
	status, err := bucket.Client.GetObjectLegalHold(ctx, bucket.Bucket, key, minio.GetObjectLegalHoldOptions{})
	if err != nil || status == nil || *status != minio.LegalHoldEnabled {
		t.Fatalf("S3 legal hold after the hold: %v, %v", status, err)
	}
	if err := bucket.Client.RemoveObject(ctx, bucket.Bucket, key, minio.RemoveObjectOptions{VersionID: info.VersionID}); err == nil {
		t.Fatal("a direct S3 delete of the held object went through")
	}
	if _, err := bucket.Client.StatObject(ctx, bucket.Bucket, key, minio.StatObjectOptions{VersionID: info.VersionID}); err != nil {
		t.Fatalf("the held object after the refused delete: %v", err)
	}

	if _, err := holds.Release(ctx, admin, app.Client{}, h.ID); err != nil {
		t.Fatal(err)
	}
	if err := bucket.Client.RemoveObject(ctx, bucket.Bucket, key, minio.RemoveObjectOptions{VersionID: info.VersionID}); err != nil {
		t.Fatalf("the delete after the release: %v", err)
	}
}
