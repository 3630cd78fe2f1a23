package transfers

import (
	"context"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/policies"
)

// Quotas is what resumable uploads ask of the policies domain (app/policies): an
// upload's whole Upload-Length is reserved against its package owner's quota when it
// is created, held until it completes or ends, and every PATCH checks the owner's
// size limits again.
type Quotas interface {
	For(ctx context.Context, userID int64) (policies.Policy, error)
	Reserve(ctx context.Context, userID, bytes, packageSize int64, hold policies.Hold) (*policies.Reservation, error)
	Attach(ctx context.Context, r *policies.Reservation, tusUploadID uuid.UUID) error
	Release(ctx context.Context, r *policies.Reservation) error
	// Committed is told after a file of the user was recorded (the 90 % notice).
	Committed(ctx context.Context, userID int64)
}

// reserve holds an upload's length for the owner of p before the upload exists
// (nil: no policies apply).
func (r *Resumable) reserve(ctx context.Context, p app.Package, length int64) (*policies.Reservation, error) {
	if r.cfg.Quotas == nil {
		return nil, nil
	}
	return r.cfg.Quotas.Reserve(ctx, p.OwnerUserID, length, p.TotalSize, policies.Hold{})
}

// attach ties the reservation to the upload's row, whose end gives it back; when
// that fails the reservation is given back and the upload ended.
func (r *Resumable) attach(ctx context.Context, res *policies.Reservation, u TusUpload) error {
	if res == nil {
		return nil
	}
	if err := r.cfg.Quotas.Attach(ctx, res, u.ID); err != nil {
		_ = r.cfg.Quotas.Release(ctx, res)
		_ = r.store.DeleteUpload(context.WithoutCancel(ctx), u.ID)
		return err
	}
	return nil
}

// release gives back a reservation whose upload was not created.
func (r *Resumable) release(ctx context.Context, res *policies.Reservation) {
	if res != nil {
		_ = r.cfg.Quotas.Release(ctx, res)
	}
}

// committed tells the policies that a file of p's owner was recorded.
func (r *Resumable) committed(ctx context.Context, p app.Package) {
	if r.cfg.Quotas != nil {
		r.cfg.Quotas.Committed(ctx, p.OwnerUserID)
	}
}

// checkSizes checks an upload under way against its owner's size limits as they
// stand now (an admin may have lowered them since its creation).
func (r *Resumable) checkSizes(ctx context.Context, p app.Package, u TusUpload) error {
	if r.cfg.Quotas == nil {
		return nil
	}
	pol, err := r.cfg.Quotas.For(ctx, p.OwnerUserID)
	if err != nil {
		return err
	}
	return policies.CheckFileSize(pol, u.Length, p.TotalSize)
}
