package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/expiry/internal/app"
)

// Objects removes objects from the S3 bucket through minio-go.
type Objects struct {
	s *storage.Store
}

var _ app.Objects = (*Objects)(nil)

// NewObjects returns the object store.
func NewObjects(s *storage.Store) *Objects { return &Objects{s: s} }

// Remove deletes the objects for good with S3 multi-object deletes (1000 keys a
// request), every version of each in a bucket with object lock (storage.RemoveObjects).
// A key whose object is already missing counts as removed.
func (o *Objects) Remove(ctx context.Context, keys []string) ([]string, error) {
	return o.s.RemoveObjects(ctx, keys)
}

// AbortStaleUploads aborts the incomplete multipart uploads of keys under prefix that
// were initiated before before. It lists the whole bucket's uploads and filters them
// here: MinIO lists multipart uploads for the whole bucket or one exact key, not for a
// prefix.
func (o *Objects) AbortStaleUploads(ctx context.Context, prefix string, before time.Time) (int, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the lister if we return early
	var stale []minio.ObjectMultipartInfo
	for u := range o.s.Client.ListIncompleteUploads(lctx, o.s.Bucket, "", true) {
		if u.Err != nil {
			return 0, fmt.Errorf("list incomplete uploads: %w", u.Err)
		}
		if strings.HasPrefix(u.Key, prefix) && u.UploadID != "" && u.Initiated.Before(before) {
			stale = append(stale, u)
		}
	}
	core := minio.Core{Client: o.s.Client}
	aborted := 0
	var errs []error
	for _, u := range stale {
		err := core.AbortMultipartUpload(ctx, o.s.Bucket, u.Key, u.UploadID)
		if err != nil && minio.ToErrorResponse(err).Code != minio.NoSuchUpload {
			errs = append(errs, fmt.Errorf("abort upload of %s: %w", u.Key, err))
			continue
		}
		aborted++
	}
	return aborted, errors.Join(errs...)
}
