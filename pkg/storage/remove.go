package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/minio/minio-go/v7"
)

// Removing objects for good. A bucket made with object lock (Config.ObjectLock) is
// versioned: there a delete that names no version only puts a delete marker on top of
// the object, whose data stays behind as a noncurrent version and keeps its space. So
// with object lock an object is removed version by version, delete markers included.
// S3 refuses to remove a version under a legal hold (or a retention), whoever asks; that
// refusal is returned like any other failure.

// RemoveObject removes the object at key for good: without object lock one delete, with
// it every version of key (Versions), one delete each. An object that is not there is
// no error.
func (s *Store) RemoveObject(ctx context.Context, key string) error {
	if !s.ObjectLock {
		return s.Client.RemoveObject(ctx, s.Bucket, key, minio.RemoveObjectOptions{})
	}
	versions, err := s.Versions(ctx, key)
	if err != nil {
		return err
	}
	var errs []error
	for _, v := range versions {
		err := s.Client.RemoveObject(ctx, s.Bucket, key, minio.RemoveObjectOptions{VersionID: v.VersionID})
		if err != nil && !IsMissing(err) {
			errs = append(errs, fmt.Errorf("storage: remove %s (version %s): %w", key, v.VersionID, err))
		}
	}
	return errors.Join(errs...)
}

// Versions lists every version of the object at key, delete markers included, with one
// listing of the bucket's versions under key as a prefix (stopped once past key).
func (s *Store) Versions(ctx context.Context, key string) ([]minio.ObjectInfo, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the lister when the loop ends early
	var out []minio.ObjectInfo
	for obj := range s.Client.ListObjects(lctx, s.Bucket, minio.ListObjectsOptions{Prefix: key, Recursive: true, WithVersions: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("storage: versions of %s: %w", key, obj.Err)
		}
		if obj.Key > key {
			// Listed in key order: the rest are other objects under the prefix
			// (key + ".preview.jpg", say).
			break
		}
		if obj.Key == key {
			out = append(out, obj)
		}
	}
	return out, nil
}

// RemoveObjects removes the objects at keys for good with S3 multi-object deletes (1000
// a request): without object lock each key, with it every version of each key
// (Versions, one listing a key). It returns the keys that are gone, a key with nothing
// stored included, and an error when any is not.
func (s *Store) RemoveObjects(ctx context.Context, keys []string) ([]string, error) {
	// left counts, per key, what is asked to be removed and not yet answered.
	left := make(map[string]int, len(keys))
	var (
		uniq []string
		objs []minio.ObjectInfo
	)
	for _, k := range keys {
		if _, dup := left[k]; dup {
			continue
		}
		uniq = append(uniq, k)
		if !s.ObjectLock {
			left[k] = 1
			objs = append(objs, minio.ObjectInfo{Key: k})
			continue
		}
		vs, err := s.Versions(ctx, k)
		if err != nil {
			return nil, err
		}
		left[k] = len(vs)
		objs = append(objs, vs...)
	}
	failed := make(map[string]bool)
	var firstErr error
	if len(objs) > 0 {
		ch := make(chan minio.ObjectInfo, len(objs))
		for _, o := range objs {
			ch <- o
		}
		close(ch)
		for res := range s.Client.RemoveObjectsWithResult(ctx, s.Bucket, ch, minio.RemoveObjectsOptions{}) {
			if res.Err != nil && !IsMissing(res.Err) {
				failed[res.ObjectName] = true
				if firstErr == nil {
					firstErr = res.Err
				}
				continue
			}
			left[res.ObjectName]--
		}
	}
	removed := make([]string, 0, len(uniq))
	unanswered := 0
	for _, k := range uniq {
		switch n := left[k]; {
		case failed[k]:
		case n <= 0:
			removed = append(removed, k)
		case s.ObjectLock && s.gone(ctx, k):
			// minio-go answers nothing for a version that is not there (removed
			// meanwhile): the listing tells.
			removed = append(removed, k)
		default:
			unanswered++
		}
	}
	if firstErr != nil {
		return removed, fmt.Errorf("storage: %d of %d objects not removed: %w", len(uniq)-len(removed), len(uniq), firstErr)
	}
	if unanswered > 0 {
		// An answer per object is the contract; anything else must not be taken for success.
		return removed, fmt.Errorf("storage: no answer for %d of %d objects asked to be removed", unanswered, len(uniq))
	}
	return removed, nil
}

// gone reports whether no version of key is left.
func (s *Store) gone(ctx context.Context, key string) bool {
	vs, err := s.Versions(ctx, key)
	return err == nil && len(vs) == 0
}

// IsMissing reports whether err is S3's answer that the object or the version asked
// for is not there.
func IsMissing(err error) bool {
	switch minio.ToErrorResponse(err).Code {
	case minio.NoSuchKey, "NoSuchVersion", "NotFound":
		return true
	}
	return false
}
