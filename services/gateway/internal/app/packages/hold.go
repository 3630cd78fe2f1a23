package packages

import (
	"context"
	"fmt"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// ObjectLocker puts S3's legal hold on an object (SHIPFILE_S3_OBJECT_LOCK).
type ObjectLocker interface {
	SetLegalHold(ctx context.Context, key string, on bool) error
}

// WithObjectLock has every file recorded in a package under a legal hold (its own or
// its owner's: a file uploaded to a held package, or to a new package of a held user)
// get S3's legal hold on its object too, as the objects a hold finds when it is placed
// do (audit.Holds).
func WithObjectLock(l ObjectLocker) Option {
	return func(s *Packages) { s.locker = l }
}

// holdObject puts S3's legal hold on the object of a file being recorded in p, when a
// hold covers p. It runs in the file's transaction, after the package's row was locked:
// a hold placed meanwhile either committed before that lock (p.OnHold is then true) or
// waits for the file's commit and finds the file among the objects it holds. An object
// held by S3 and then not recorded (the commit failed) stays until its legal hold is
// lifted by hand.
func (s *Packages) holdObject(ctx context.Context, p *app.Package, key string) error {
	if s.locker == nil || !p.OnHold {
		return nil
	}
	if err := s.locker.SetLegalHold(ctx, key, true); err != nil {
		return fmt.Errorf("the package is on legal hold, and its new object could not be held: %w", err)
	}
	return nil
}
