package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/scanner/internal/app"
	"github.com/shipfile/shipfile/services/scanner/internal/store"
)

// Quarantine moves an object to the quarantine bucket (or deletes it without one), and
// doing it again, the object already gone, is no error; Open of a missing object is
// app.ErrNotFound.
func TestQuarantine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	files := servicetest.Bucket(t)
	qbucket := servicetest.Bucket(t) // made by the helper, removed at the end
	put := func(key string) {
		t.Helper()
		if _, err := files.Client.PutObject(ctx, files.Bucket, key, strings.NewReader("bad bytes"), 9, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(bucket, key string) bool {
		_, err := files.Client.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
		return err == nil
	}

	moved := store.NewObjects(files, qbucket.Bucket)
	if err := moved.EnsureQuarantine(ctx); err != nil {
		t.Fatal(err)
	}
	key := "packages/p/" + strings.ToLower(rand.Text())
	put(key)
	obj, err := moved.Open(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(obj)
	obj.Close()
	if !bytes.Equal(b, []byte("bad bytes")) {
		t.Fatalf("Open read %q", b)
	}
	for range 2 {
		if err := moved.Quarantine(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if exists(files.Bucket, key) || !exists(qbucket.Bucket, key) {
		t.Fatal("with a quarantine bucket: the object should be moved there")
	}
	if _, err := moved.Open(ctx, key); !errors.Is(err, app.ErrNotFound) {
		t.Errorf("Open of the moved object: %v, want ErrNotFound", err)
	}

	deleted := store.NewObjects(files, "")
	key2 := "packages/p/" + strings.ToLower(rand.Text())
	put(key2)
	for range 2 {
		if err := deleted.Quarantine(ctx, key2); err != nil {
			t.Fatal(err)
		}
	}
	if exists(files.Bucket, key2) {
		t.Fatal("without a quarantine bucket: the object should be deleted")
	}
}
