package web

import (
	"errors"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// scanHeld is what the recipient's page says of a file the scan holds back ("" when
// the link serves it).
func scanHeld(err error) string {
	var sh *app.ScanHeldError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, app.ErrInfected):
		return "malware found: removed"
	case errors.As(err, &sh) && sh.Scan == app.ScanPending:
		return "being checked for malware"
	default:
		return "could not be checked for malware"
	}
}

// fileScan is what a page shows of a file's malware scan.
type fileScan struct {
	// ScanText is the state in words (app.ScanText).
	ScanText string
	// Held says why the scan keeps the file from being served to the page's reader now
	// ("" when it is served).
	Held string
	// Releasable: the owner's page offers to release the file (the scanner could not
	// judge it and nobody has released it yet).
	Releasable bool
}

// ownerScan is what the owner's package page shows of f's scan.
func (w *Web) ownerScan(f app.File) fileScan {
	s := fileScan{ScanText: app.ScanText(f), Releasable: app.ScanReleasable(f) == nil && !f.ScanReleased()}
	if err := w.packages.OwnerScanCheck(f); err != nil {
		s.Held = scanHeld(err)
	}
	return s
}

// releaseFile takes the owner's page's Release button of a file the scanner could not
// judge (POST /api/v1/packages/{id}/files/{file_id}/release in the API).
func (w *Web) releaseFile(c *gin.Context) {
	w.packageItemAction(c, "file_id", "file", "file-released", func(u app.User, id, fileID uuid.UUID) error {
		_, err := w.packages.ReleaseFile(c.Request.Context(), u, client(c), id, fileID)
		return err
	})
}
