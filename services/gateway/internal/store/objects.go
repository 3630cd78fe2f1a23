package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"sync"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Objects keeps file bytes in the S3 bucket through minio-go.
type Objects struct {
	s    *storage.Store
	core minio.Core
	// parts are the part buffers: an upload holds one while it runs, so memory is
	// bounded by concurrent uploads × part size (minio-go's own unknown-length
	// PutObject allocates a fresh part buffer on the Go heap per call).
	parts *partBuffers
}

var _ app.ObjectStore = (*Objects)(nil)

// NewObjects returns the object store. partSize bounds the memory of one upload: a
// stream of unknown length is sent as a multipart upload of parts of this size, one
// part buffered at a time.
func NewObjects(s *storage.Store, partSize uint64) *Objects {
	return &Objects{s: s, core: minio.Core{Client: s.Client}, parts: &partBuffers{size: int(partSize)}}
}

// Put streams r to key, one pooled part buffer at a time: a stream that fits in one
// part is one PUT, a longer one a multipart upload. When the stream or the store fails
// midway the multipart upload is aborted and any object under key removed, so nothing
// remains. An error of r (a file over its size limit) comes back as it is.
func (o *Objects) Put(ctx context.Context, key string, r io.Reader, contentType string) (int64, error) {
	buf, err := o.parts.get()
	if err != nil {
		return 0, err
	}
	defer o.parts.put(buf)

	n, err := io.ReadFull(r, buf)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		// The whole stream fits in one part. (A truncated body is caught by the caller,
		// which checks the body's own error after Put.)
		info, err := o.s.Client.PutObject(ctx, o.s.Bucket, key, bytes.NewReader(buf[:n]), int64(n),
			minio.PutObjectOptions{ContentType: contentType, DisableContentSha256: true}) // minio-go adds a CRC32C instead
		if err != nil {
			o.removeObject(ctx, key)
			return 0, err
		}
		return info.Size, nil
	case err != nil:
		return 0, unwrapReadErr(err)
	}

	uploadID, err := o.core.NewMultipartUpload(ctx, o.s.Bucket, key, minio.PutObjectOptions{
		ContentType: contentType, AutoChecksum: minio.ChecksumCRC32C,
	})
	if err != nil {
		return 0, err
	}
	size, err := o.putParts(ctx, key, uploadID, r, buf)
	if err != nil {
		_ = o.core.AbortMultipartUpload(context.WithoutCancel(ctx), o.s.Bucket, key, uploadID)
		o.removeObject(ctx, key)
		return 0, unwrapReadErr(err)
	}
	return size, nil
}

// putParts uploads buf (full) as part 1, then the rest of r in parts of len(buf) (the
// last one shorter), each sent while it is read (putStreamedPart), and completes the
// upload.
func (o *Objects) putParts(ctx context.Context, key, uploadID string, r io.Reader, buf []byte) (int64, error) {
	part, err := o.putBufferedPart(ctx, key, uploadID, 1, buf)
	if err != nil {
		return 0, err
	}
	parts := []minio.CompletePart{{PartNumber: 1, ETag: part.ETag, ChecksumCRC32C: part.ChecksumCRC32C}}
	size := int64(len(buf))
	for number, last := 2, false; !last; number++ {
		var n int
		part, n, last, err = o.putStreamedPart(ctx, key, uploadID, number, r, buf)
		if err != nil {
			return 0, err
		}
		if n > 0 {
			parts = append(parts, minio.CompletePart{PartNumber: number, ETag: part.ETag, ChecksumCRC32C: part.ChecksumCRC32C})
			size += int64(n)
		}
	}
	if _, err := o.core.CompleteMultipartUpload(ctx, o.s.Bucket, key, uploadID, parts, minio.PutObjectOptions{}); err != nil {
		return 0, err
	}
	return size, nil
}

// putBufferedPart sends data, held in memory, as part number of a multipart upload,
// with its CRC32C (partOptions); minio-go retries it on a store failure.
func (o *Objects) putBufferedPart(ctx context.Context, key, uploadID string, number int, data []byte) (minio.ObjectPart, error) {
	return o.core.PutObjectPart(ctx, o.s.Bucket, key, uploadID, number, bytes.NewReader(data), int64(len(data)), partOptions(data))
}

// partOptions sends a part with its CRC32C, which the store verifies, instead of a
// SHA-256 of the payload in the request's signature: the gateway already hashes every
// file with SHA-256 for its record, and a second SHA-256 pass over every byte (minio-go
// signs plain-HTTP payloads) was the largest cost of an upload after that one. Over
// HTTPS minio-go does not hash the payload either.
func partOptions(part []byte) minio.PutObjectPartOptions {
	sum := crc32.Checksum(part, crc32cTable)
	h := make(http.Header, 2)
	h.Set("x-amz-checksum-algorithm", "CRC32C")
	h.Set("x-amz-checksum-crc32c", crc32cBase64(sum))
	return minio.PutObjectPartOptions{CustomHeader: h, DisableContentSha256: true}
}

var crc32cTable = crc32.MakeTable(crc32.Castagnoli)

// removeObject deletes whatever a failed Put may have left under key.
func (o *Objects) removeObject(ctx context.Context, key string) {
	_ = o.s.RemoveObject(context.WithoutCancel(ctx), key)
}

// Open returns a seekable reader of the object's bytes.
func (o *Objects) Open(ctx context.Context, key string) (app.Object, error) {
	obj, err := o.s.Client.GetObject(ctx, o.s.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("open object: %w", err)
	}
	// GetObject is lazy: ask for the object's info now, so a missing object fails here
	// rather than halfway through an answer.
	if _, err := obj.Stat(); err != nil {
		obj.Close()
		return nil, fmt.Errorf("open object %s: %w", key, err)
	}
	br := readBuffers.Get().(*bufio.Reader)
	br.Reset(obj)
	return &object{Object: obj, r: br}, nil
}

// readBufferSize is how much an object read fetches at once.
const readBufferSize = 512 << 10

// readBuffers are the read buffers of open objects.
var readBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufferSize) }}

// object reads a minio-go object through a large buffer. minio-go hands every Read to
// a goroutine of its own, so reading 32 KiB at a time (what http.ServeContent and
// io.Copy do) would cost a goroutine hand-off per 32 KiB.
type object struct {
	*minio.Object
	r *bufio.Reader
}

// Read reads from the buffer, refilled readBufferSize at a time.
func (o *object) Read(p []byte) (int, error) { return o.r.Read(p) }

// Seek moves the object's offset (as seen by the reader) and drops the buffer.
func (o *object) Seek(offset int64, whence int) (int64, error) {
	if whence == io.SeekCurrent {
		offset -= int64(o.r.Buffered())
	}
	n, err := o.Object.Seek(offset, whence)
	o.r.Reset(o.Object)
	return n, err
}

// Close closes the object and gives its buffer back.
func (o *object) Close() error {
	err := o.Object.Close()
	if o.r != nil {
		o.r.Reset(nil)
		readBuffers.Put(o.r)
		o.r = nil
	}
	return err
}

// Remove deletes the object for good, every version of it in a bucket with object
// lock (storage.RemoveObject), where S3 refuses while the object is under a legal hold;
// a missing object is not an error.
func (o *Objects) Remove(ctx context.Context, key string) error {
	return o.s.RemoveObject(ctx, key)
}

// unwrapReadErr surfaces an application error raised by the reader (a file over its
// size limit) through minio-go's wrapping.
func unwrapReadErr(err error) error {
	var ae *app.Error
	if errors.As(err, &ae) {
		return ae
	}
	return err
}

// SetLegalHold puts S3's legal hold on the object at key (on) or lifts it; while it
// is on, S3 refuses to delete the object, whoever asks. It needs a bucket made with
// object locking (SHIPFILE_S3_OBJECT_LOCK).
func (o *Objects) SetLegalHold(ctx context.Context, key string, on bool) error {
	status := minio.LegalHoldDisabled
	if on {
		status = minio.LegalHoldEnabled
	}
	if err := o.s.Client.PutObjectLegalHold(ctx, o.s.Bucket, key, minio.PutObjectLegalHoldOptions{Status: &status}); err != nil {
		return fmt.Errorf("store: legal hold on %s: %w", key, err)
	}
	return nil
}
