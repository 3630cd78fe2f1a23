package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/app/transfers"
)

// The bytes of resumable uploads: one S3 multipart upload per upload, sent part by part
// from the pooled part buffers, and small tail objects between PATCHes.

var _ transfers.ChunkStore = (*Objects)(nil)

// Buffer returns a pooled part buffer and the function that gives it back.
func (o *Objects) Buffer() ([]byte, func(), error) {
	buf, err := o.parts.get()
	if err != nil {
		return nil, nil, err
	}
	return buf, func() { o.parts.put(buf) }, nil
}

// StartMultipart starts a multipart upload of key whose parts carry CRC32Cs.
func (o *Objects) StartMultipart(ctx context.Context, key, contentType string) (string, error) {
	return o.core.NewMultipartUpload(ctx, o.s.Bucket, key, minio.PutObjectOptions{
		ContentType: contentType, AutoChecksum: minio.ChecksumCRC32C,
	})
}

// PutPart sends data as part number of the multipart upload.
func (o *Objects) PutPart(ctx context.Context, key, uploadID string, number int, data []byte) (transfers.TusPart, error) {
	part, err := o.putBufferedPart(ctx, key, uploadID, number, data)
	if err != nil {
		return transfers.TusPart{}, fmt.Errorf("upload part %d: %w", number, err)
	}
	return transfers.TusPart{Number: number, ETag: part.ETag, CRC32C: part.ChecksumCRC32C, Size: int64(len(data))}, nil
}

// StreamPart sends part number, whose first filled bytes are in buf, while reading the
// rest from r into buf (streamPart): the bytes go to the store as they arrive. A stored
// part has its Size set.
func (o *Objects) StreamPart(ctx context.Context, key, uploadID string, number int, r io.Reader, buf []byte, filled int) (transfers.Streamed, error) {
	part, stored, n, srcErr, err := o.streamPart(ctx, key, uploadID, number, r, buf, filled)
	s := transfers.Streamed{N: n, BodyErr: srcErr}
	if err != nil {
		return s, fmt.Errorf("upload part %d: %w", number, err)
	}
	if stored {
		s.Part = transfers.TusPart{Number: number, ETag: part.ETag, CRC32C: part.ChecksumCRC32C, Size: int64(n)}
	}
	return s, nil
}

// CompleteMultipart joins the parts into the object.
func (o *Objects) CompleteMultipart(ctx context.Context, key, uploadID string, parts []transfers.TusPart) error {
	cp := make([]minio.CompletePart, len(parts))
	for i, p := range parts {
		cp[i] = minio.CompletePart{PartNumber: p.Number, ETag: p.ETag, ChecksumCRC32C: p.CRC32C}
	}
	_, err := o.core.CompleteMultipartUpload(ctx, o.s.Bucket, key, uploadID, cp, minio.PutObjectOptions{})
	return err
}

// AbortMultipart aborts a multipart upload and removes its parts; one that is gone
// already is no error.
func (o *Objects) AbortMultipart(ctx context.Context, key, uploadID string) error {
	err := o.core.AbortMultipartUpload(ctx, o.s.Bucket, key, uploadID)
	if err != nil && minio.ToErrorResponse(err).Code == minio.NoSuchUpload {
		return nil
	}
	return err
}

// PutSmall stores data as one object.
func (o *Objects) PutSmall(ctx context.Context, key string, data []byte, contentType string) error {
	_, err := o.s.Client.PutObject(ctx, o.s.Bucket, key, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: contentType, DisableContentSha256: true})
	return err
}

// ReadSmall reads a whole object into buf; an object larger than buf is an error.
func (o *Objects) ReadSmall(ctx context.Context, key string, buf []byte) (int, error) {
	obj, err := o.s.Client.GetObject(ctx, o.s.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return 0, err
	}
	defer obj.Close()
	n, err := io.ReadFull(obj, buf)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return n, nil
	case err != nil:
		return n, err
	}
	var one [1]byte
	if m, _ := obj.Read(one[:]); m > 0 {
		return n, fmt.Errorf("object %s is larger than a part", key)
	}
	return n, nil
}

// RemovePrefix removes every object under prefix, every version of each in a bucket
// with object lock (pkg/storage, "Removing objects for good").
func (o *Objects) RemovePrefix(ctx context.Context, prefix string) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	objs := o.s.Client.ListObjects(lctx, o.s.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true, WithVersions: o.s.ObjectLock})
	var errs []error
	for res := range o.s.Client.RemoveObjectsWithResult(ctx, o.s.Bucket, objs, minio.RemoveObjectsOptions{}) {
		if res.Err != nil && !storage.IsMissing(res.Err) {
			errs = append(errs, res.Err)
		}
	}
	return errors.Join(errs...)
}

// ListMultipart lists the incomplete multipart uploads of keys under prefix. MinIO
// lists them for the whole bucket or one exact key, so the filter is here.
func (o *Objects) ListMultipart(ctx context.Context, prefix string) ([]transfers.Multipart, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []transfers.Multipart
	for u := range o.s.Client.ListIncompleteUploads(lctx, o.s.Bucket, "", true) {
		if u.Err != nil {
			return nil, u.Err
		}
		if strings.HasPrefix(u.Key, prefix) && u.UploadID != "" {
			out = append(out, transfers.Multipart{Key: u.Key, UploadID: u.UploadID, Initiated: u.Initiated})
		}
	}
	return out, nil
}
