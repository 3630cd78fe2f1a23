package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
)

// ArchiveOmittedHeader counts the files a link's archive leaves out because of the
// malware scan; the zip's comment names them (docs/SCANNING.md).
const ArchiveOmittedHeader = "Shipfile-Archive-Omitted"

// maxZipComment is the most a zip comment holds.
const maxZipComment = 65535

// scanOmitted sets ArchiveOmittedHeader on the archive's answer when the scan leaves
// files out, and returns the zip comment that names them ("" when none). A failure to
// list them leaves the archive as it is: it is only the notice.
func (h *handlers) scanOmitted(c *gin.Context, id uuid.UUID) string {
	omitted, err := h.packages.ScanOmitted(c.Request.Context(), id)
	if err != nil || len(omitted) == 0 {
		return ""
	}
	c.Writer.Header().Set(ArchiveOmittedHeader, strconv.Itoa(len(omitted)))
	comment := "Left out of this archive: " + strings.Join(omitted, "; ")
	if len(comment) > maxZipComment {
		comment = comment[:maxZipComment]
	}
	return comment
}

// releaseFile releases a file the scanner could not judge (unscannable, or error after
// the retries), so block mode serves it: owner or admin, audited; answers the file.
func (h *handlers) releaseFile(c *gin.Context) {
	id, fileID, err := fileParams(c)
	if err != nil {
		_ = c.Error(err)
		return
	}
	f, err := h.packages.ReleaseFile(c.Request.Context(), currentUser(c), client(c), id, fileID)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toAPIFile(f))
}
