package store

import (
	"context"
	"fmt"
	"io"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/scanner/internal/app"
)

// Objects reads the files' objects and removes infected ones (moving them to the
// quarantine bucket when one is configured).
type Objects struct {
	s          *storage.Store
	quarantine string
}

var _ app.Objects = (*Objects)(nil)

// NewObjects returns the object store of s; quarantine is the bucket infected objects
// are moved to ("" deletes them).
func NewObjects(s *storage.Store, quarantine string) *Objects {
	return &Objects{s: s, quarantine: quarantine}
}

// EnsureQuarantine creates the quarantine bucket when one is configured and missing.
func (o *Objects) EnsureQuarantine(ctx context.Context) error {
	if o.quarantine == "" {
		return nil
	}
	q := storage.Store{Client: o.s.Client, Bucket: o.quarantine}
	return q.EnsureBucket(ctx)
}

// Open streams the object at key; minio-go reads it in the caller's chunks, never
// whole. A missing object is app.ErrNotFound.
func (o *Objects) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := o.s.Client.GetObject(ctx, o.s.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("store: open object: %w", err)
	}
	if _, err := obj.Stat(); err != nil {
		obj.Close()
		if storage.IsMissing(err) {
			return nil, app.ErrNotFound
		}
		return nil, fmt.Errorf("store: stat object: %w", err)
	}
	return obj, nil
}

// Quarantine moves the object to the quarantine bucket (same key), or deletes it when
// there is none. An object already gone is done.
func (o *Objects) Quarantine(ctx context.Context, key string) error {
	if o.quarantine != "" {
		_, err := o.s.Client.CopyObject(ctx,
			minio.CopyDestOptions{Bucket: o.quarantine, Object: key},
			minio.CopySrcOptions{Bucket: o.s.Bucket, Object: key})
		if storage.IsMissing(err) {
			return nil // moved by an earlier attempt
		}
		if err != nil {
			return fmt.Errorf("store: copy to quarantine: %w", err)
		}
	}
	if err := o.s.Client.RemoveObject(ctx, o.s.Bucket, key, minio.RemoveObjectOptions{}); err != nil && !storage.IsMissing(err) {
		return fmt.Errorf("store: remove object: %w", err)
	}
	return nil
}
