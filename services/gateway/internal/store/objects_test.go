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
	"github.com/shipfile/shipfile/services/gateway/internal/store"
)

const partSize = 5 << 20 // S3's smallest part

// TestPutSizes stores streams around the part size (one PUT, several parts, an exact
// multiple, empty) and reads back the same bytes.
func TestPutSizes(t *testing.T) {
	t.Parallel()
	s := servicetest.Bucket(t)
	objects := store.NewObjects(s, partSize)
	for name, size := range map[string]int{
		"empty": 0, "one byte": 1, "one part less a byte": partSize - 1, "one part": partSize,
		"two parts": 2 * partSize, "two parts and a bit": 2*partSize + 3,
	} {
		t.Run(name, func(t *testing.T) {
			data := make([]byte, size)
			_, _ = rand.Read(data)
			key := "k/" + strings.ReplaceAll(name, " ", "-")
			// A reader that hands out odd-sized chunks, as a network body does.
			n, err := objects.Put(context.Background(), key, io.LimitReader(&chunky{r: bytes.NewReader(data)}, int64(size)), "application/octet-stream")
			if err != nil || n != int64(size) {
				t.Fatalf("Put = %d, %v; want %d", n, err, size)
			}
			obj, err := s.Client.GetObject(context.Background(), s.Bucket, key, minio.GetObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer obj.Close()
			got, err := io.ReadAll(obj)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes (%v), want the %d stored", len(got), err, size)
			}
		})
	}
}

// TestPutReaderFails: a stream that fails midway, in the first part or after several,
// leaves neither an object nor an incomplete upload, and its error comes back.
func TestPutReaderFails(t *testing.T) {
	t.Parallel()
	s := servicetest.Bucket(t)
	objects := store.NewObjects(s, partSize)
	boom := errors.New("client went away")
	for name, after := range map[string]int64{"in the first part": 1000, "after two parts": 2*partSize + 10} {
		t.Run(name, func(t *testing.T) {
			key := "fail/" + strings.ReplaceAll(name, " ", "-")
			r := io.MultiReader(io.LimitReader(rand.Reader, after), errReader{boom})
			if _, err := objects.Put(context.Background(), key, r, "application/octet-stream"); !errors.Is(err, boom) {
				t.Fatalf("Put error %v, want %v", err, boom)
			}
			if _, err := s.Client.StatObject(context.Background(), s.Bucket, key, minio.StatObjectOptions{}); err == nil {
				t.Fatal("an object was left behind")
			}
			// The whole bucket is listed: MinIO lists no incomplete upload under a prefix.
			for u := range s.Client.ListIncompleteUploads(context.Background(), s.Bucket, "", true) {
				if u.Key == key {
					t.Fatalf("an incomplete upload was left behind: %+v", u)
				}
			}
		})
	}
}

type chunky struct{ r io.Reader }

func (c *chunky) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), 7777)]) }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestOpenReadSeek reads an object through Open's buffered reader with seeks in
// between, as http.ServeContent does for ranges.
func TestOpenReadSeek(t *testing.T) {
	t.Parallel()
	s := servicetest.Bucket(t)
	objects := store.NewObjects(s, partSize)
	data := make([]byte, 3<<20+17)
	_, _ = rand.Read(data)
	ctx := context.Background()
	if _, err := objects.Put(ctx, "seek", bytes.NewReader(data), "application/octet-stream"); err != nil {
		t.Fatal(err)
	}
	obj, err := objects.Open(ctx, "seek")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	read := func(n int) []byte {
		t.Helper()
		b := make([]byte, n)
		if _, err := io.ReadFull(obj, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	if got := read(1000); !bytes.Equal(got, data[:1000]) {
		t.Fatal("first bytes differ")
	}
	if pos, err := obj.Seek(0, io.SeekCurrent); err != nil || pos != 1000 {
		t.Fatalf("position %d, %v; want 1000", pos, err)
	}
	if pos, err := obj.Seek(-17, io.SeekEnd); err != nil || pos != int64(len(data)-17) {
		t.Fatalf("seek from end: %d, %v", pos, err)
	}
	if got := read(17); !bytes.Equal(got, data[len(data)-17:]) {
		t.Fatal("last bytes differ")
	}
	if _, err := obj.Seek(1<<20, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(obj)
	if err != nil || !bytes.Equal(rest, data[1<<20:]) {
		t.Fatalf("read from 1 MiB: %d bytes, %v", len(rest), err)
	}
}
