package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app/webhookadmin"
)

// webhookResponse is a webhook subscription record. It never carries the secret.
type webhookResponse struct {
	ID             int64      `json:"id"`
	URL            string     `json:"url"`
	Description    string     `json:"description"`
	Events         []string   `json:"events"`
	Active         bool       `json:"active"`
	DisabledReason *string    `json:"disabled_reason"`
	DisabledAt     *time.Time `json:"disabled_at"`
	FailingSince   *time.Time `json:"failing_since"`
	LastSuccessAt  *time.Time `json:"last_success_at"`
	MaxInFlight    int        `json:"max_in_flight"`
	RateLimit      *int       `json:"rate_limit"`
	Ordering       string     `json:"ordering"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// createdWebhookResponse is the creation answer: the record and, this once, its secret.
type createdWebhookResponse struct {
	webhookResponse
	Secret string `json:"secret"`
}

// webhookAttemptResponse is one line of a subscription's delivery log.
type webhookAttemptResponse struct {
	ID              int64     `json:"id"`
	DeliveryID      string    `json:"delivery_id"`
	EventID         string    `json:"event_id"`
	Event           string    `json:"event"`
	Attempt         int       `json:"attempt"`
	StatusCode      *int      `json:"status_code"`
	Error           *string   `json:"error"`
	DurationMS      int       `json:"duration_ms"`
	ResponseExcerpt *string   `json:"response_excerpt"`
	CreatedAt       time.Time `json:"created_at"`
	DeliveryStatus  string    `json:"delivery_status"`
}

func toWebhookResponse(w webhookadmin.Webhook) webhookResponse {
	evs := w.Events
	if evs == nil {
		evs = []string{}
	}
	return webhookResponse{
		ID: w.ID, URL: w.URL, Description: w.Description, Events: evs, Active: w.Active,
		DisabledReason: w.DisabledReason, DisabledAt: utcPtr(w.DisabledAt), FailingSince: utcPtr(w.FailingSince),
		LastSuccessAt: utcPtr(w.LastSuccessAt), MaxInFlight: w.MaxInFlight, RateLimit: w.RateLimit,
		Ordering: w.Ordering, CreatedAt: w.CreatedAt.UTC(), UpdatedAt: w.UpdatedAt.UTC(),
	}
}

func toWebhookAttemptResponse(a webhookadmin.WebhookAttempt) webhookAttemptResponse {
	return webhookAttemptResponse{
		ID: a.ID, DeliveryID: a.DeliveryID.String(), EventID: a.EventID, Event: a.Event, Attempt: a.Attempt,
		StatusCode: a.StatusCode, Error: a.Error, DurationMS: a.DurationMS, ResponseExcerpt: a.ResponseExcerpt,
		CreatedAt: a.CreatedAt.UTC(), DeliveryStatus: string(a.DeliveryStatus),
	}
}

func (h *handlers) listWebhooks(c *gin.Context) {
	hooks, err := h.webhooks.List(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	out := make([]webhookResponse, 0, len(hooks))
	for _, w := range hooks {
		out = append(out, toWebhookResponse(w))
	}
	c.JSON(http.StatusOK, listResponse[webhookResponse]{Items: out})
}

type createWebhookRequest struct {
	URL         *string   `json:"url"`
	Events      *[]string `json:"events"`
	Description *string   `json:"description"`
	MaxInFlight *int      `json:"max_in_flight"`
	RateLimit   *int      `json:"rate_limit"`
	Ordering    *string   `json:"ordering"`
}

func (h *handlers) createWebhook(c *gin.Context) {
	var req createWebhookRequest
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	w, err := h.webhooks.Create(c.Request.Context(), webhookadmin.NewWebhook{
		URL: req.URL, Events: req.Events, Description: req.Description, MaxInFlight: req.MaxInFlight, RateLimit: req.RateLimit,
		Ordering: req.Ordering,
	})
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusCreated, createdWebhookResponse{webhookResponse: toWebhookResponse(w), Secret: w.Secret})
}

func (h *handlers) getWebhook(c *gin.Context) {
	id, err := pathID(c, "id", "webhook")
	if err != nil {
		_ = c.Error(err)
		return
	}
	w, err := h.webhooks.Get(c.Request.Context(), id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toWebhookResponse(w))
}

type updateWebhookRequest struct {
	URL         *string       `json:"url"`
	Events      *[]string     `json:"events"`
	Description *string       `json:"description"`
	Active      *bool         `json:"active"`
	MaxInFlight *int          `json:"max_in_flight"`
	RateLimit   nullable[int] `json:"rate_limit"`
	Ordering    *string       `json:"ordering"`
}

func (h *handlers) updateWebhook(c *gin.Context) {
	id, err := pathID(c, "id", "webhook")
	if err != nil {
		_ = c.Error(err)
		return
	}
	req := updateWebhookRequest{RateLimit: nullable[int]{field: "rate_limit", kind: "an integer"}}
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	w, err := h.webhooks.Update(c.Request.Context(), id, toWebhookPatch(req))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toWebhookResponse(w))
}

func toWebhookPatch(req updateWebhookRequest) webhookadmin.WebhookPatch {
	p := webhookadmin.WebhookPatch{URL: req.URL, Events: req.Events, Description: req.Description, Active: req.Active,
		MaxInFlight: req.MaxInFlight, Ordering: req.Ordering}
	p.RateLimit = req.RateLimit.Nullable
	return p
}

func (h *handlers) deleteWebhook(c *gin.Context) {
	id, err := pathID(c, "id", "webhook")
	if err != nil {
		_ = c.Error(err)
		return
	}
	if err := h.webhooks.Delete(c.Request.Context(), id); err != nil {
		_ = c.Error(err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *handlers) testWebhook(c *gin.Context) {
	id, err := pathID(c, "id", "webhook")
	if err != nil {
		_ = c.Error(err)
		return
	}
	eventID, err := h.webhooks.Test(c.Request.Context(), currentUser(c), client(c), id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"event_id": eventID})
}

func (h *handlers) rotateWebhookSecret(c *gin.Context) {
	id, err := pathID(c, "id", "webhook")
	if err != nil {
		_ = c.Error(err)
		return
	}
	secret, err := h.webhooks.RotateSecret(c.Request.Context(), id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"secret": secret})
}

func (h *handlers) listWebhookDeliveries(c *gin.Context) {
	id, err := pathID(c, "id", "webhook")
	if err != nil {
		_ = c.Error(err)
		return
	}
	f := webhookadmin.WebhookAttemptFilter{WebhookID: id}
	if f.Limit, err = pageLimit(c); err != nil {
		_ = c.Error(err)
		return
	}
	if f.BeforeID, err = idCursor(c); err != nil {
		_ = c.Error(err)
		return
	}
	limit := f.Limit
	f.Limit++ // one more than the page tells whether another page follows
	attempts, err := h.webhooks.Attempts(c.Request.Context(), f)
	if err != nil {
		_ = c.Error(err)
		return
	}
	attempts, next := page(attempts, limit, func(last webhookadmin.WebhookAttempt) string { return strconv.FormatInt(last.ID, 10) })
	items := make([]webhookAttemptResponse, len(attempts))
	for i, a := range attempts {
		items[i] = toWebhookAttemptResponse(a)
	}
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next})
}

func (h *handlers) redeliverWebhook(c *gin.Context) {
	id, err := pathID(c, "id", "webhook")
	if err != nil {
		_ = c.Error(err)
		return
	}
	deliveryID, err := pathUUID(c, "delivery_id", "delivery")
	if err != nil {
		_ = c.Error(err)
		return
	}
	if err := h.webhooks.Redeliver(c.Request.Context(), id, deliveryID); err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"delivery_id": deliveryID.String()})
}
