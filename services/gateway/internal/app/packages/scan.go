package packages

import (
	"context"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// UseScanMode sets the scanning mode the link routes and the owner's download follow
// (default off). Call it before the service is used.
func (s *Packages) UseScanMode(m app.ScanMode) { s.scan = m }

// scanAllows is the one check of the link's download routes (a file, the archive):
// nil when f may be served through the link under the service's scanning mode.
func (s *Packages) scanAllows(f app.File) error { return app.ScanAllows(s.scan, f) }

// ScanOmitted lists the files of package id that the archive of its link leaves out
// because of the scan (pending, or unscannable or failed and not released, in block
// mode; infected in any mode), with why, so the archive can say so. Files uploaded
// through the link are not listed (they are never in it).
func (s *Packages) ScanOmitted(ctx context.Context, id uuid.UUID) ([]string, error) {
	files, err := s.store.ListFiles(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if !app.LinkMayDownload(f) {
			continue
		}
		switch err := s.scanAllows(f); {
		case err == nil:
		case f.Scan == app.ScanInfected:
			out = append(out, f.Filename+" (malware found)")
		case f.Scan == app.ScanPending:
			out = append(out, f.Filename+" (being checked for malware)")
		default:
			out = append(out, f.Filename+" (could not be checked for malware)")
		}
	}
	return out, nil
}

// LinkScanCheck is scanAllows for the recipient's page: nil when the link serves f now,
// else why not (ErrInfected, or a *app.ScanHeldError naming the file's state).
func (s *Packages) LinkScanCheck(f app.File) error { return s.scanAllows(f) }
