package servicetest

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/storage"
)

// Bucket opens the MinIO of SHIPFILE_S3_* (or the defaults) with a bucket of the test's
// own; when the test ends its objects and incomplete uploads are removed, then the
// bucket. An unreachable MinIO fails the test.
func Bucket(t testing.TB) *storage.Store {
	t.Helper()
	var cfg storage.Config
	if err := config.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Bucket = "test-" + strings.ToLower(rand.Text()[:16])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := storage.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("MinIO at %s is not reachable (start it with make up or make test): %v", cfg.Endpoint, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for obj := range s.Client.ListObjects(ctx, s.Bucket, minio.ListObjectsOptions{Recursive: true}) {
			_ = s.Client.RemoveObject(ctx, s.Bucket, obj.Key, minio.RemoveObjectOptions{})
		}
		for u := range s.Client.ListIncompleteUploads(ctx, s.Bucket, "", true) {
			_ = s.Client.RemoveIncompleteUpload(ctx, s.Bucket, u.Key)
		}
		_ = s.Client.RemoveBucket(ctx, s.Bucket)
	})
	return s
}
