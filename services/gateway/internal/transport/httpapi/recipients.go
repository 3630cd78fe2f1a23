package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// recipientResponse is one recipient of a package record (docs/API.md, "Several recipients").
type recipientResponse struct {
	ID            string     `json:"id"`
	Email         string     `json:"email"`
	Name          string     `json:"name"`
	Language      string     `json:"language"`
	LinkState     string     `json:"link_state"`
	DownloadCount int64      `json:"download_count"`
	LastUsedAt    *time.Time `json:"last_used_at"`
}

// addedRecipientResponse answers POST …/recipients: the recipient and their link,
// shown this once.
type addedRecipientResponse struct {
	recipientResponse
	MagicLink string `json:"magic_link"`
}

// linkResponseItem is one entry of a finalize answer's links.
type linkResponseItem struct {
	RecipientID string `json:"recipient_id"`
	Email       string `json:"email"`
	MagicLink   string `json:"magic_link"`
}

func toRecipientResponses(rs []app.Recipient) []recipientResponse {
	out := make([]recipientResponse, len(rs))
	for i, r := range rs {
		out[i] = toRecipientResponse(r)
	}
	return out
}

func toRecipientResponse(r app.Recipient) recipientResponse {
	return recipientResponse{
		ID: r.ID.String(), Email: r.Email, Name: r.Name, Language: r.Language, LinkState: string(r.LinkState),
		DownloadCount: r.DownloadCount, LastUsedAt: utcPtr(r.LastUsedAt),
	}
}

func toLinkItems(links []app.LinkMint) []linkResponseItem {
	out := make([]linkResponseItem, len(links))
	for i, l := range links {
		out[i] = linkResponseItem{RecipientID: l.RecipientID.String(), Email: l.Email, MagicLink: l.MagicLink}
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
	c.JSON(http.StatusCreated, addedRecipientResponse{toRecipientResponse(r), link})
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
	c.JSON(http.StatusOK, toPackageResponse(p))
}
