package httpapi

import (
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
)

// ArchiveOmittedHeader counts the files a link's archive leaves out because of the
// malware scan; the zip's comment names them (SPEC "Malware scanning").
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
