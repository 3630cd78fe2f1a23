package httpapi

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	api "github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/services/gateway/internal/app/webhookadmin"
)

// createdWebhook is a CreatedWebhook: the subscription and, this once, its secret.
type createdWebhook struct {
	api.Webhook
	api.WebhookSecret
}

// toAPIWebhook is a webhook subscription as the API shows it; it never carries the secret.
func toAPIWebhook(w webhookadmin.Webhook) api.Webhook {
	evs := make([]api.EventType, len(w.Events))
	for i, e := range w.Events {
		evs[i] = api.EventType(e)
	}
	return api.Webhook{
		Id: w.ID, Url: w.URL, Description: w.Description, Events: evs, Active: w.Active,
		DisabledReason: w.DisabledReason, DisabledAt: utcPtr(w.DisabledAt), FailingSince: utcPtr(w.FailingSince),
		LastSuccessAt: utcPtr(w.LastSuccessAt), MaxInFlight: w.MaxInFlight, RateLimit: w.RateLimit,
		Ordering: api.WebhookOrdering(w.Ordering), CreatedAt: w.CreatedAt.UTC(), UpdatedAt: w.UpdatedAt.UTC(),
	}
}

// toAPIWebhookAttempt is one line of a subscription's delivery log.
func toAPIWebhookAttempt(a webhookadmin.WebhookAttempt) api.WebhookAttempt {
	return api.WebhookAttempt{
		Id: a.ID, DeliveryId: a.DeliveryID, EventId: a.EventID, Event: a.Event, Attempt: a.Attempt,
		StatusCode: a.StatusCode, Error: a.Error, DurationMs: a.DurationMS, ResponseExcerpt: a.ResponseExcerpt,
		CreatedAt: a.CreatedAt.UTC(), DeliveryStatus: api.WebhookAttemptDeliveryStatus(a.DeliveryStatus),
	}
}

func (h *handlers) listWebhooks(c *gin.Context) {
	hooks, err := h.webhooks.List(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	out := make([]api.Webhook, len(hooks))
	for i, w := range hooks {
		out[i] = toAPIWebhook(w)
	}
	c.JSON(http.StatusOK, api.WebhookList{Items: out})
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
	c.JSON(http.StatusCreated, createdWebhook{toAPIWebhook(w), api.WebhookSecret{Secret: w.Secret}})
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
	c.JSON(http.StatusOK, toAPIWebhook(w))
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
	c.JSON(http.StatusOK, toAPIWebhook(w))
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
	queued, err := uuid.Parse(eventID)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusAccepted, api.WebhookTestQueued{EventId: queued})
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
	c.JSON(http.StatusOK, api.WebhookSecret{Secret: secret})
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
	items := make([]api.WebhookAttempt, len(attempts))
	for i, a := range attempts {
		items[i] = toAPIWebhookAttempt(a)
	}
	c.JSON(http.StatusOK, api.WebhookAttemptList{Items: items, NextCursor: next})
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
	c.JSON(http.StatusAccepted, api.Redelivery{DeliveryId: deliveryID})
}
