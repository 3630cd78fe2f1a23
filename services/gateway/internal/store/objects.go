package store

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Objects keeps file bytes in the S3 bucket through minio-go.
type Objects struct {
	s        *storage.Store
	partSize uint64
}

var _ app.ObjectStore = (*Objects)(nil)

// NewObjects returns the object store. partSize bounds the memory of one upload: a
// stream of unknown length is sent as a multipart upload of parts of this size, one
// part buffered at a time.
func NewObjects(s *storage.Store, partSize uint64) *Objects {
	return &Objects{s: s, partSize: partSize}
}

// Put streams r to key. When the stream fails midway the multipart upload is aborted
// and any object under key removed, so nothing remains.
func (o *Objects) Put(ctx context.Context, key string, r io.Reader, contentType string) (int64, error) {
	info, err := o.s.Client.PutObject(ctx, o.s.Bucket, key, r, -1, minio.PutObjectOptions{
		ContentType: contentType,
		PartSize:    o.partSize,
		NumThreads:  1,
	})
	if err != nil {
		_ = o.s.Client.RemoveObject(context.WithoutCancel(ctx), o.s.Bucket, key, minio.RemoveObjectOptions{})
		return 0, unwrapReadErr(err)
	}
	return info.Size, nil
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
	return obj, nil
}

// Remove deletes the object; a missing object is not an error.
func (o *Objects) Remove(ctx context.Context, key string) error {
	return o.s.Client.RemoveObject(ctx, o.s.Bucket, key, minio.RemoveObjectOptions{})
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
