package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// nullable is a JSON field that may be absent, null or a value.
type nullable[T any] struct {
	app.Nullable[T]
	field string
	kind  string
}

func (n *nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		n.Value = nil
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return app.Invalid("%s must be %s or null", n.field, n.kind)
	}
	n.Value = &v
	return nil
}

type updatePackageRequest struct {
	Title         *string `json:"title"`
	Note          *string `json:"note"`
	RecipientName *string `json:"recipient_name"`
	// RecipientEmail is read beside recipients only, where it must name the first
	// entry (docs/API.md, "Several recipients"); alone it changes nothing.
	RecipientEmail *string               `json:"recipient_email"`
	Recipients     *[]app.RecipientInput `json:"recipients"`
	ExpiresAt      *string               `json:"expires_at"`
	Password       nullable[string]      `json:"password"`
	MaxDownloads   nullable[int]         `json:"max_downloads"`
	NotifyOwner    *bool                 `json:"notify_owner"`
	// Encryption is fixed at creation: sent here, it is refused.
	Encryption json.RawMessage `json:"encryption"`
}

// updatePackage is PATCH /api/v1/packages/{id}.
func (h *handlers) updatePackage(c *gin.Context) {
	id, err := pathUUID(c, "id", "package")
	if err != nil {
		_ = c.Error(err)
		return
	}
	req := updatePackageRequest{
		Password:     nullable[string]{field: "password", kind: "a string"},
		MaxDownloads: nullable[int]{field: "max_downloads", kind: "an integer"},
	}
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	if req.Encryption != nil {
		_ = c.Error(app.Invalid("encryption is fixed when the package is created"))
		return
	}
	expires, err := parseTime("expires_at", req.ExpiresAt)
	if err != nil {
		_ = c.Error(err)
		return
	}
	p, err := h.packages.Update(c.Request.Context(), currentUser(c), client(c), id, packages.PackagePatch{
		Title: req.Title, Note: req.Note, RecipientName: req.RecipientName, RecipientEmail: req.RecipientEmail, Recipients: req.Recipients, ExpiresAt: expires,
		Password: req.Password.Nullable, MaxDownloads: req.MaxDownloads.Nullable, NotifyOwner: req.NotifyOwner,
	})
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toAPIPackage(p))
}
