package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app/transfers"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
)

// TestStreamPart: a tus part sent while it is read. A whole part is stored, even when
// the body ends with its last bytes; a body that ends or fails inside the part stores
// nothing and leaves every byte it gave in the buffer, for the caller's tail.
func TestStreamPart(t *testing.T) {
	t.Parallel()
	s := servicetest.Bucket(t)
	objects := store.NewObjects(s, partSize)
	ctx := context.Background()
	data := make([]byte, 2*partSize)
	_, _ = rand.Read(data)
	boom := errors.New("client went away")

	for name, c := range map[string]struct {
		body    io.Reader // after the first filled bytes of data, already in the buffer
		filled  int
		stored  bool
		n       int
		wantErr error
	}{
		"a part, its start in the buffer":     {body: bytes.NewReader(data[1000:]), filled: 1000, stored: true, n: partSize},
		"a part and more":                     {body: bytes.NewReader(data), stored: true, n: partSize},
		"a part, the end with its last bytes": {body: iotest.DataErrReader(bytes.NewReader(data[:partSize])), stored: true, n: partSize, wantErr: io.EOF},
		"the end inside the part":             {body: bytes.NewReader(data[:partSize-100]), n: partSize - 100, wantErr: io.EOF},
		"a failure inside it":                 {body: io.MultiReader(bytes.NewReader(data[:3000]), errReader{boom}), n: 3000, wantErr: boom},
	} {
		t.Run(name, func(t *testing.T) {
			key := "tus/" + name
			id, err := objects.StartMultipart(ctx, key, "application/octet-stream")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = objects.AbortMultipart(ctx, key, id) }()
			buf := make([]byte, partSize)
			filled := copy(buf, data[:c.filled])
			streamed, err := objects.StreamPart(ctx, key, id, 1, &chunky{r: c.body}, buf, filled)
			if err != nil {
				t.Fatalf("store error %v", err)
			}
			part, n, srcErr := streamed.Part, streamed.N, streamed.BodyErr
			if n != c.n || !bytes.Equal(buf[:n], data[:n]) {
				t.Fatalf("%d bytes in the buffer, want the body's first %d", n, c.n)
			}
			if !errors.Is(srcErr, c.wantErr) || (c.wantErr == nil && srcErr != nil) {
				t.Fatalf("body error %v, want %v", srcErr, c.wantErr)
			}
			if (part.Size > 0) != c.stored {
				t.Fatalf("part %+v, stored %v", part, c.stored)
			}
			res, err := (&minio.Core{Client: s.Client}).ListObjectParts(ctx, s.Bucket, key, id, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(res.ObjectParts); got != map[bool]int{true: 1, false: 0}[c.stored] {
				t.Fatalf("the store holds %d parts", got)
			}
			if !c.stored {
				return
			}
			// The stored part is the object once completed.
			if err := objects.CompleteMultipart(ctx, key, id, []transfers.TusPart{part}); err != nil {
				t.Fatal(err)
			}
			obj, err := s.Client.GetObject(ctx, s.Bucket, key, minio.GetObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer obj.Close()
			if got, err := io.ReadAll(obj); err != nil || !bytes.Equal(got, data[:partSize]) {
				t.Fatalf("object of %d bytes (%v), want the part", len(got), err)
			}
		})
	}
}
