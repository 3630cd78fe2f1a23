package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"
	api_types "github.com/oapi-codegen/runtime/types"

	api "github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// addedRecipient is an AddedRecipient: the recipient and their link, shown this once.
type addedRecipient struct {
	api.Recipient
	api.RecipientMagicLink
}

// toAPIRecipients is a package's recipients as the API lists them: [] for none.
func toAPIRecipients(rs []app.Recipient) []api.Recipient {
	out := make([]api.Recipient, len(rs))
	for i, r := range rs {
		out[i] = toAPIRecipient(r)
	}
	return out
}

// toAPIRecipient is one recipient of a package as the API shows it (docs/API.md,
// "Several recipients").
func toAPIRecipient(r app.Recipient) api.Recipient {
	return api.Recipient{
		Id: r.ID, Email: api_types.Email(r.Email), Name: r.Name, Language: api.Language(r.Language),
		LinkState: api.RecipientLinkState(r.LinkState), DownloadCount: r.DownloadCount, LastUsedAt: utcPtr(r.LastUsedAt),
	}
}

// toAPIRecipientLinks is a finalize answer's links, one per recipient: [] for none.
func toAPIRecipientLinks(links []app.LinkMint) []api.RecipientLink {
	out := make([]api.RecipientLink, len(links))
	for i, l := range links {
		out[i] = api.RecipientLink{RecipientId: l.RecipientID, Email: api_types.Email(l.Email), MagicLink: l.MagicLink}
	}
	return out
}

// addRecipient is POST /api/v1/packages/{id}/recipients.
func (h *handlers) addRecipient(c *gin.Context) {
	id, err := pathUUID(c, "id", "package")
	if err != nil {
		_ = c.Error(err)
		return
	}
	var req app.RecipientInput
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	if req.Language == nil {
		lang := senderLanguage(c)
		req.Language = &lang
	}
	_, r, link, err := h.packages.AddRecipient(c.Request.Context(), currentUser(c), client(c), id, req)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, addedRecipient{toAPIRecipient(r), api.RecipientMagicLink{MagicLink: link}})
}

// revokeRecipient is POST /api/v1/packages/{id}/recipients/{recipient_id}/revoke.
func (h *handlers) revokeRecipient(c *gin.Context) {
	id, err := pathUUID(c, "id", "package")
	if err != nil {
		_ = c.Error(err)
		return
	}
	rid, err := pathUUID(c, "recipient_id", "recipient")
	if err != nil {
		_ = c.Error(err)
		return
	}
	p, err := h.packages.RevokeRecipient(c.Request.Context(), currentUser(c), client(c), id, rid)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toAPIPackage(p))
}
