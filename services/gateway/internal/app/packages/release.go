package packages

import (
	"context"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// ReleaseFile releases a file of a package the user may manage that the scanner could
// not judge (unscannable, or error after the retries), so block mode serves it: the
// file records who released it and when, and the audit log says so (file.release), in
// one transaction. Any other file is a conflict; a file released already is answered
// as it is.
func (s *Packages) ReleaseFile(ctx context.Context, u app.User, client app.Client, id, fileID uuid.UUID) (app.File, error) {
	if _, err := s.visible(ctx, u, id); err != nil {
		return app.File{}, err
	}
	return s.store.ReleaseFile(ctx, id, fileID, u.ID, func(_ *app.Package, f app.File) (app.Effects, error) {
		if err := app.ScanReleasable(f); err != nil {
			return app.Effects{}, err
		}
		entry := app.UserAudit(u, client, "file.release", id, &fileID)
		entry.Detail = releaseDetail(f)
		return app.Effects{Audit: []app.AuditEntry{entry}}, nil
	})
}

// releaseDetail is the audit entry's detail of a release: the file's name and what
// the scanner said.
func releaseDetail(f app.File) string {
	d := f.Filename + ": scan " + string(f.Scan)
	if f.ScanSignature != "" {
		d += " (" + f.ScanSignature + ")"
	}
	return d
}

// OwnerScanCheck is app.OwnerScanAllows under the service's scanning mode, for the
// owner's package page: nil when the owner's download serves f now, else why not.
func (s *Packages) OwnerScanCheck(f app.File) error { return app.OwnerScanAllows(s.scan, f) }
