package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// previewViaLink answers a file's image preview through a link: the link's rules
// (password, revocation, scan state), but no download counted and no budget taken.
func (h *handlers) previewViaLink(c *gin.Context) {
	fileID, err := pathUUID(c, "file_id", "file")
	if err != nil {
		_ = c.Error(err)
		return
	}
	f, obj, err := h.links.PreviewViaLink(c.Request.Context(), c.Param("token"), client(c), fileID)
	if err != nil {
		_ = c.Error(err)
		return
	}
	defer obj.Close()
	servePreview(c, f, obj)
}

// previewFile answers a file's image preview to its package's owner (or an admin).
func (h *handlers) previewFile(c *gin.Context) {
	id, fileID, err := fileParams(c)
	if err != nil {
		_ = c.Error(err)
		return
	}
	f, obj, err := h.packages.OpenPreview(c.Request.Context(), currentUser(c), id, fileID)
	if err != nil {
		_ = c.Error(err)
		return
	}
	defer obj.Close()
	servePreview(c, f, obj)
}

// servePreview answers a preview's JPEG, shown in the page (inline), never cached by
// a shared cache. A preview is small and answered whole: a Range (and If-Range) is
// ignored, as HTTP lets a server do, and so are If-Match and If-Unmodified-Since (a
// preview has no ETag), so that the answers are the ones proto/openapi.yaml names
// (200, or 304 for If-Modified-Since), never a 206, 412 or a plain-text 416.
func servePreview(c *gin.Context, f app.File, obj app.Object) {
	for _, h := range []string{"Range", "If-Range", "If-Match", "If-Unmodified-Since"} {
		c.Request.Header.Del(h)
	}
	w := c.Writer
	w.Header().Set("Content-Type", "image/jpeg")
	w.Header().Set("Content-Disposition", "inline")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "private, no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; sandbox")
	http.ServeContent(wholeOnly{w}, c.Request, "", f.CreatedAt, obj)
}

// wholeOnly says "Accept-Ranges: none" in place of the "bytes" http.ServeContent
// announces, since a preview's ranges are ignored. ServeContent writes the status
// line itself before any body, so WriteHeader is the one place to say it.
type wholeOnly struct{ http.ResponseWriter }

func (w wholeOnly) WriteHeader(code int) {
	w.Header().Set("Accept-Ranges", "none")
	w.ResponseWriter.WriteHeader(code)
}
