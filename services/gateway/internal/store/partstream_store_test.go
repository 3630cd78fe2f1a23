package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
)

// TestPutStreamedPartCutOff: the store's connection breaks while a part is being sent
// as it is read from the upload (the request of part 2 cut after 1 MiB, between the
// gateway and a real MinIO). The part goes again from the part buffer, where the bytes
// already sent are kept, and the object holds exactly the upload's bytes.
func TestPutStreamedPartCutOff(t *testing.T) {
	t.Parallel()
	s := servicetest.Bucket(t)
	var cfg storage.Config
	if err := config.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	var cut, part2 atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: cfg.Endpoint})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
			part2.Add(1)
			if cut.CompareAndSwap(0, 1) {
				_, _ = io.CopyN(io.Discard, r.Body, 1<<20)
				panic(http.ErrAbortHandler) // the connection breaks mid-request
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	client, err := minio.New(strings.TrimPrefix(srv.URL, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	objects := store.NewObjects(&storage.Store{Client: client, Bucket: s.Bucket}, partSize)

	data := make([]byte, 2*partSize+12345)
	_, _ = rand.Read(data)
	n, err := objects.Put(context.Background(), "cut", &chunky{r: bytes.NewReader(data)}, "application/octet-stream")
	if err != nil || n != int64(len(data)) {
		t.Fatalf("Put = %d, %v; want %d", n, err, len(data))
	}
	if cut.Load() != 1 || part2.Load() != 2 {
		t.Fatalf("part 2 was sent %d times (cut: %d); want the cut request and one more", part2.Load(), cut.Load())
	}
	obj, err := s.Client.GetObject(context.Background(), s.Bucket, "cut", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	got, err := io.ReadAll(obj)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), want the %d uploaded", len(got), err, len(data))
	}
}
