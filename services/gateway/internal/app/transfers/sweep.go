package transfers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// RunSweeper ends expired or orphaned uploads every interval until ctx ends.
func (r *Resumable) RunSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := r.Sweep(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("upload sweep failed; the next one tries again", "ended", n, "err", err)
		} else if n > 0 {
			r.log.Info("upload sweep", "ended", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// end removes what an unfinished upload stored and forgets it. The caller holds its
// lease, or no PATCH can run on it any more.
func (r *Resumable) end(ctx context.Context, u TusUpload) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	if u.S3UploadID != "" && !u.Completed {
		errs = append(errs, r.chunks.AbortMultipart(ctx, u.ObjectKey, u.S3UploadID))
	}
	errs = append(errs, r.chunks.RemovePrefix(ctx, tailPrefix(u)))
	if !u.Completed {
		// A completion that stored the object but failed to record it leaves it here.
		exists, err := r.store.FileExists(ctx, u.FileID)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !exists:
			errs = append(errs, r.chunks.Remove(ctx, u.ObjectKey))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("end upload %s: %w", u.ID, err)
	}
	return r.store.DeleteUpload(ctx, u.ID)
}

// endQuietly ends an upload when no PATCH holds it, logging a failure (the sweep tries
// again).
func (r *Resumable) endQuietly(ctx context.Context, u TusUpload) {
	owner := uuid.New()
	locked, err := r.store.LockUpload(ctx, u.ID, owner, r.cfg.Lease, nil)
	if err == nil {
		err = r.end(ctx, locked)
	}
	if err != nil && !errors.Is(err, ErrUploadLocked) && !errors.Is(err, app.ErrNotFound) {
		r.log.Warn("ending an upload failed; the sweep tries again", "upload_id", u.ID, "err", err)
	}
}

// EndPackageUploads ends the unfinished uploads of a package at once (it was deleted,
// revoked or expired). An upload a PATCH holds is left to the sweep.
func (r *Resumable) EndPackageUploads(ctx context.Context, packageID uuid.UUID) {
	ups, err := r.store.PackageUploads(ctx, packageID)
	if err != nil {
		r.log.Warn("listing a package's uploads failed; the sweep ends them", "package_id", packageID, "err", err)
		return
	}
	for _, u := range ups {
		if !u.Completed {
			r.endQuietly(ctx, u)
		}
	}
}

// Sweep ends uploads past their resume window, and those of packages that are gone or
// no longer take uploads, and returns how many it ended.
func (r *Resumable) Sweep(ctx context.Context) (int, error) {
	ups, err := r.store.UploadsToEnd(ctx, 500)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, u := range ups {
		owner := uuid.New()
		locked, err := r.store.LockUpload(ctx, u.ID, owner, r.cfg.Lease, nil)
		if errors.Is(err, ErrUploadLocked) || errors.Is(err, app.ErrNotFound) {
			continue
		}
		if err == nil {
			err = r.end(ctx, locked)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	orphans, err := r.abortOrphans(ctx)
	return n + orphans, errors.Join(append(errs, err)...)
}

// abortOrphans aborts the incomplete multipart uploads under tus/ older than
// OrphanGrace that no upload row names.
func (r *Resumable) abortOrphans(ctx context.Context) (int, error) {
	mps, err := r.chunks.ListMultipart(ctx, tusPrefix)
	if err != nil || len(mps) == 0 {
		return 0, err
	}
	ids := make([]string, len(mps))
	for i, m := range mps {
		ids[i] = m.UploadID
	}
	known, err := r.store.KnownMultipart(ctx, ids)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	cutoff := r.p.Now().Add(-r.cfg.OrphanGrace)
	for _, m := range mps {
		if known[m.UploadID] || !m.Initiated.Before(cutoff) {
			continue
		}
		if err := r.chunks.AbortMultipart(ctx, m.Key, m.UploadID); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
