package httpapi

import (
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/gin-gonic/gin"

	api "github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// End-to-end encryption (docs/ENCRYPTION.md): the package manifest
// (an age file, stored and served as bytes), and the user's key pair for file requests.

// fileManifest is a file's own encrypted manifest entry as the API shows it (the
// File schema's byte format: the standard base64 of the age file), null when it has none.
func fileManifest(f app.File) *[]byte {
	if f.Manifest == nil {
		return nil
	}
	return &f.Manifest
}

// nullIfEmpty is s, or null when it is empty.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// encryptionOf is a package's encryption as the API shows it.
func encryptionOf(p app.Package) string {
	if p.Encryption == "" {
		return string(app.EncryptionNone)
	}
	return string(p.Encryption)
}

func (h *handlers) putManifest(c *gin.Context) {
	id, err := pathUUID(c, "id", "package")
	if err != nil {
		_ = c.Error(err)
		return
	}
	if ct := c.GetHeader("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/octet-stream" {
			_ = c.Error(&httpError{status: http.StatusUnsupportedMediaType, detail: "Content-Type must be application/octet-stream (the manifest's age file)"})
			return
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, app.MaxPackageManifest))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			_ = c.Error(&app.Error{Kind: app.KindTooLarge, Detail: "the manifest must be at most 1 MiB"})
			return
		}
		_ = c.Error(&app.Error{Kind: app.KindBadRequest, Detail: "the request body could not be read"})
		return
	}
	if err := h.packages.PutManifest(c.Request.Context(), currentUser(c), client(c), id, data); err != nil {
		_ = c.Error(err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *handlers) getManifest(c *gin.Context) {
	id, err := pathUUID(c, "id", "package")
	if err != nil {
		_ = c.Error(err)
		return
	}
	data, err := h.packages.Manifest(c.Request.Context(), currentUser(c), id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	writeManifest(c, data)
}

func (h *handlers) linkManifest(c *gin.Context) {
	data, err := h.links.LinkManifest(c.Request.Context(), c.Param("token"), client(c))
	if err != nil {
		_ = c.Error(err)
		return
	}
	writeManifest(c, data)
}

func writeManifest(c *gin.Context, data []byte) {
	c.Header("Cache-Control", "private, no-store")
	c.Header("X-Content-Type-Options", "nosniff")
	c.Data(http.StatusOK, "application/octet-stream", data)
}

type putKeyRequest struct {
	PublicKey      *string `json:"public_key"`
	SealedIdentity *string `json:"sealed_identity"`
}

func (h *handlers) putKey(c *gin.Context) {
	var req putKeyRequest
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	if req.PublicKey == nil || req.SealedIdentity == nil {
		_ = c.Error(app.Invalid("public_key and sealed_identity are required"))
		return
	}
	k, err := h.packages.SetKey(c.Request.Context(), currentUser(c), client(c), *req.PublicKey, *req.SealedIdentity)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toAPIUserKey(k))
}

func (h *handlers) getKey(c *gin.Context) {
	k, err := h.packages.Key(c.Request.Context(), currentUser(c))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Header("Cache-Control", "private, no-store")
	c.JSON(http.StatusOK, toAPIUserKey(k))
}

// toAPIUserKey is a user's key pair for encrypted file requests.
func toAPIUserKey(k app.UserKey) api.UserKey {
	return api.UserKey{PublicKey: k.PublicKey, SealedIdentity: k.SealedIdentity, CreatedAt: k.CreatedAt.UTC()}
}

// maxManifestField is the most of a multipart manifest field read: the base64 of
// app.MaxFileManifest bytes, and some room.
const maxManifestField = app.MaxFileManifest/3*4 + 8 + 1024
