package store_test

import (
	"context"
	"crypto/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/expiry/internal/expirytest"
	"github.com/shipfile/shipfile/services/expiry/internal/store"
)

func TestObjectsRemove(t *testing.T) {
	m := servicetest.StartMinIO(t)
	s := expirytest.Bucket(t, m)
	objects := store.NewObjects(s)
	expirytest.Put(t, s, []string{"packages/p/1", "packages/p/2", "packages/q/1"})

	// A missing object counts as removed: it is gone, which is what the queue wants.
	keys := []string{"packages/p/1", "packages/p/2", "packages/p/missing"}
	removed, err := objects.Remove(ctx, keys)
	slices.Sort(removed)
	if err != nil || !slices.Equal(removed, []string{"packages/p/1", "packages/p/2", "packages/p/missing"}) {
		t.Fatalf("Remove = %v, %v", removed, err)
	}
	if left := expirytest.Objects(t, s); !slices.Equal(left, []string{"packages/q/1"}) {
		t.Fatalf("left %v, want only packages/q/1", left)
	}

	// Storage down: nothing is reported removed, and the error says so.
	m.Stop()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	removed, err = objects.Remove(rctx, []string{"packages/q/1"})
	if err == nil || len(removed) != 0 {
		t.Fatalf("Remove with MinIO stopped = %v, %v; want an error and nothing removed", removed, err)
	}
	m.Start()
	if left := expirytest.Objects(t, s); !slices.Equal(left, []string{"packages/q/1"}) {
		t.Fatalf("after the failed removal: %v", left)
	}
}

func TestObjectsAbortStaleUploads(t *testing.T) {
	m := servicetest.StartMinIO(t)
	s := expirytest.Bucket(t, m)
	objects := store.NewObjects(s)
	core := minio.Core{Client: s.Client}
	start := func(key string) string {
		id, err := core.NewMultipartUpload(ctx, s.Bucket, key, minio.PutObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	start("packages/p/stale")
	start("elsewhere/not-ours")
	uploads := func() []string {
		var keys []string
		for u := range s.Client.ListIncompleteUploads(ctx, s.Bucket, "", true) {
			if u.Err != nil {
				t.Fatal(u.Err)
			}
			keys = append(keys, u.Key)
		}
		slices.Sort(keys)
		return keys
	}
	if got := uploads(); len(got) != 2 {
		t.Fatalf("uploads %v, want 2", got)
	}

	// Uploads started within the age are left alone.
	n, err := objects.AbortStaleUploads(ctx, "packages/", time.Now().Add(-time.Hour))
	if err != nil || n != 0 || len(uploads()) != 2 {
		t.Fatalf("young uploads: aborted %d, %v; left %v", n, err, uploads())
	}
	// Older ones under the prefix are aborted; others' keys are not touched.
	n, err = objects.AbortStaleUploads(ctx, "packages/", time.Now().Add(time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("aborted %d, %v; want 1", n, err)
	}
	if got := uploads(); !slices.Equal(got, []string{"elsewhere/not-ours"}) || strings.HasPrefix(got[0], "packages/") {
		t.Fatalf("left %v, want only the upload outside packages/", got)
	}
}

// TestObjectsRemoveEveryVersion: in a bucket with object lock (versioned), Remove leaves
// no version of a removed object behind: an object written twice, and one a delete that
// named no version left as a delete marker over its data. An object under S3's legal
// hold is refused by S3: it is not reported removed and its version stays, and so does
// an object whose key merely starts with a removed one's.
func TestObjectsRemoveEveryVersion(t *testing.T) {
	m := servicetest.StartMinIO(t)
	s, err := storage.Open(ctx, storage.Config{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey,
		Bucket: "lock-" + strings.ToLower(rand.Text()[:12]), ObjectLock: true})
	if err != nil {
		t.Fatal(err)
	}
	objects := store.NewObjects(s)
	expirytest.Put(t, s, []string{"packages/p/1", "packages/p/2", "packages/p/2.preview.jpg", "packages/p/held"})
	expirytest.Put(t, s, []string{"packages/p/1"})
	if err := s.Client.RemoveObject(ctx, s.Bucket, "packages/p/2", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	on := minio.LegalHoldEnabled
	if err := s.Client.PutObjectLegalHold(ctx, s.Bucket, "packages/p/held", minio.PutObjectLegalHoldOptions{Status: &on}); err != nil {
		t.Fatal(err)
	}
	versions := func(key string) int {
		t.Helper()
		vs, err := s.Versions(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return len(vs)
	}
	if n := versions("packages/p/1"); n != 2 {
		t.Fatalf("packages/p/1 has %d versions, want 2", n)
	}
	if n := versions("packages/p/2"); n != 2 {
		t.Fatalf("packages/p/2 has %d versions (its data and a delete marker), want 2", n)
	}

	removed, err := objects.Remove(ctx, []string{"packages/p/1", "packages/p/2", "packages/p/held", "packages/p/missing"})
	slices.Sort(removed)
	if err == nil || !slices.Equal(removed, []string{"packages/p/1", "packages/p/2", "packages/p/missing"}) {
		t.Fatalf("Remove = %v, %v; want all but the held object, and an error", removed, err)
	}
	for key, want := range map[string]int{"packages/p/1": 0, "packages/p/2": 0, "packages/p/missing": 0, "packages/p/held": 1, "packages/p/2.preview.jpg": 1} {
		if n := versions(key); n != want {
			t.Errorf("%s: %d versions left, want %d", key, n, want)
		}
	}

	off := minio.LegalHoldDisabled
	if err := s.Client.PutObjectLegalHold(ctx, s.Bucket, "packages/p/held", minio.PutObjectLegalHoldOptions{Status: &off}); err != nil {
		t.Fatal(err)
	}
	if removed, err := objects.Remove(ctx, []string{"packages/p/held"}); err != nil || len(removed) != 1 || versions("packages/p/held") != 0 {
		t.Fatalf("Remove after the legal hold is lifted = %v, %v; %d versions left", removed, err, versions("packages/p/held"))
	}
}
