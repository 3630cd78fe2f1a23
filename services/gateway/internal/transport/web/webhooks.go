package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/webhookadmin"
)

// errNoEvents is the form's own check: the API reads "no events" as "all of them".
var errNoEvents = app.Invalid("events: choose at least one event")

// webhookFields are the form fields of a subscription, named as in the API.
var webhookFields = []string{"url", "description", "events", "max_in_flight", "rate_limit"}

// limitsForm reads the form's max_in_flight (empty: unchanged or the default) and
// rate_limit (empty: no limit).
func limitsForm(c *gin.Context) (maxInFlight, rateLimit *int, err error) {
	num := func(name string) (*int, error) {
		v := strings.TrimSpace(c.PostForm(name))
		if v == "" {
			return nil, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, app.Invalid("%s must be a whole number", name)
		}
		return &n, nil
	}
	if maxInFlight, err = num("max_in_flight"); err != nil {
		return nil, nil, err
	}
	rateLimit, err = num("rate_limit")
	return maxInFlight, rateLimit, err
}

// limitsFields are the form values of a subscription's limits, to show again.
func limitsFields(c *gin.Context, form map[string]string) map[string]string {
	form["max_in_flight"], form["rate_limit"] = c.PostForm("max_in_flight"), c.PostForm("rate_limit")
	return form
}

type webhooksData struct {
	Hooks      []webhookadmin.Webhook
	AllEvents  []string
	Selected   []string // the create form's checked events
	Created    *webhookadmin.Webhook
	Secret     string // shown once, after creation
	SecretHook int64
}

// webhookList lists the subscriptions, each with a Test button, and the form to add
// one (every event checked by default).
func (w *Web) webhookList(c *gin.Context) {
	w.showWebhooks(c, http.StatusOK, view{}, webhooksData{Selected: events.Types})
}

func (w *Web) showWebhooks(c *gin.Context, status int, v view, d webhooksData) {
	hooks, err := w.webhooks.List(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	d.Hooks, d.AllEvents = hooks, events.Types
	v.Title, v.Section, v.D = "Webhooks", "webhooks", d
	w.render(c, status, "webhooks", v)
}

func (w *Web) createWebhook(c *gin.Context) {
	if err := c.Request.ParseForm(); err != nil {
		_ = c.Error(&app.Error{Kind: app.KindBadRequest, Detail: "malformed form"})
		return
	}
	u, desc := strings.TrimSpace(c.PostForm("url")), c.PostForm("description")
	evs := c.PostFormArray("events")
	var hook webhookadmin.Webhook
	maxInFlight, rateLimit, err := limitsForm(c)
	if err == nil && len(evs) == 0 {
		err = errNoEvents
	}
	if err == nil {
		hook, err = w.webhooks.Create(c.Request.Context(), webhookadmin.NewWebhook{URL: &u, Description: &desc, Events: &evs,
			MaxInFlight: maxInFlight, RateLimit: rateLimit})
	}
	if fe, msg, ok := formErrors(err, webhookFields...); ok {
		w.showWebhooks(c, http.StatusUnprocessableEntity,
			view{Errors: fe, Error: msg, Form: limitsFields(c, map[string]string{"url": u, "description": desc})},
			webhooksData{Selected: evs})
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	w.showWebhooks(c, http.StatusCreated, view{}, webhooksData{Selected: events.Types, Created: &hook, Secret: hook.Secret, SecretHook: hook.ID})
}

func (w *Web) hookID(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		_ = c.Error(app.NotFound("webhook"))
		return 0, false
	}
	return id, true
}

// deliveryLogSize is how many attempts the webhook page lists.
const deliveryLogSize = 50

type webhookData struct {
	Hook      webhookadmin.Webhook
	AllEvents []string
	Selected  []string
	Attempts  []webhookadmin.WebhookAttempt
	// Newest marks the newest attempt of each delivery, which carries its Redeliver
	// button.
	Newest map[int64]bool
	Secret string // a rotated secret, shown once
	Next   string
}

// webhookPage shows one subscription: its settings, Test, rotate, delete, and the
// delivery log with Redeliver.
func (w *Web) webhookPage(c *gin.Context) {
	id, ok := w.hookID(c)
	if !ok {
		return
	}
	w.showWebhook(c, id, http.StatusOK, view{}, "", nil)
}

func (w *Web) showWebhook(c *gin.Context, id int64, status int, v view, secret string, selected []string) {
	ctx := c.Request.Context()
	hook, err := w.webhooks.Get(ctx, id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	f := webhookadmin.WebhookAttemptFilter{WebhookID: id, Limit: deliveryLogSize + 1}
	if n, err := strconv.ParseInt(c.Query("cursor"), 10, 64); err == nil && n > 0 {
		f.BeforeID = n
	}
	attempts, err := w.webhooks.Attempts(ctx, f)
	if err != nil {
		_ = c.Error(err)
		return
	}
	d := webhookData{Hook: hook, AllEvents: events.Types, Selected: hook.Events, Secret: secret, Newest: map[int64]bool{}}
	if selected != nil {
		d.Selected = selected
	}
	if len(attempts) > deliveryLogSize {
		attempts = attempts[:deliveryLogSize]
		d.Next = url.Values{"cursor": {strconv.FormatInt(attempts[len(attempts)-1].ID, 10)}}.Encode()
	}
	seen := map[uuid.UUID]bool{}
	for _, a := range attempts {
		if !seen[a.DeliveryID] {
			seen[a.DeliveryID] = true
			d.Newest[a.ID] = true
		}
	}
	d.Attempts = attempts
	if v.Form == nil {
		v.Form = map[string]string{"url": hook.URL, "description": hook.Description, "active": strconv.FormatBool(hook.Active),
			"max_in_flight": strconv.Itoa(hook.MaxInFlight)}
		if hook.RateLimit != nil {
			v.Form["rate_limit"] = strconv.Itoa(*hook.RateLimit)
		}
	}
	v.Title, v.Section, v.D = "Webhook "+strconv.FormatInt(id, 10), "webhooks", d
	w.render(c, status, "webhook", v)
}

// saveWebhook applies the settings form.
func (w *Web) saveWebhook(c *gin.Context) {
	id, ok := w.hookID(c)
	if !ok {
		return
	}
	if err := c.Request.ParseForm(); err != nil {
		_ = c.Error(&app.Error{Kind: app.KindBadRequest, Detail: "malformed form"})
		return
	}
	u, desc := strings.TrimSpace(c.PostForm("url")), c.PostForm("description")
	evs := c.PostFormArray("events")
	active := c.PostForm("active") == "true"
	maxInFlight, rateLimit, err := limitsForm(c)
	if err == nil && len(evs) == 0 {
		err = errNoEvents
	}
	if err == nil {
		_, err = w.webhooks.Update(c.Request.Context(), id, webhookadmin.WebhookPatch{URL: &u, Description: &desc, Events: &evs, Active: &active,
			MaxInFlight: maxInFlight, RateLimit: app.Nullable[int]{Set: true, Value: rateLimit}})
	}
	if fe, msg, ok := formErrors(err, webhookFields...); ok {
		v := view{Errors: fe, Error: msg, Form: limitsFields(c, map[string]string{"url": u, "description": desc, "active": strconv.FormatBool(active)})}
		w.showWebhook(c, id, http.StatusUnprocessableEntity, v, "", evs)
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/admin/webhooks/"+strconv.FormatInt(id, 10)+"?msg=webhook-saved")
}

// testWebhook queues a webhook.test event for the subscription (the Test button).
func (w *Web) testWebhook(c *gin.Context) {
	id, ok := w.hookID(c)
	if !ok {
		return
	}
	u, _ := currentUser(c)
	if _, err := w.webhooks.Test(c.Request.Context(), u, client(c), id); err != nil {
		_ = c.Error(err)
		return
	}
	back := "/admin/webhooks/" + strconv.FormatInt(id, 10)
	if c.PostForm("from") == "list" {
		back = "/admin/webhooks"
	}
	c.Redirect(http.StatusSeeOther, back+"?msg=test-queued")
}

// rotateWebhook gives the subscription a new secret and shows it this once.
func (w *Web) rotateWebhook(c *gin.Context) {
	id, ok := w.hookID(c)
	if !ok {
		return
	}
	secret, err := w.webhooks.RotateSecret(c.Request.Context(), id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	w.showWebhook(c, id, http.StatusOK, view{}, secret, nil)
}

func (w *Web) confirmDeleteWebhook(c *gin.Context) {
	id, ok := w.hookID(c)
	if !ok {
		return
	}
	hook, err := w.webhooks.Get(c.Request.Context(), id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	w.render(c, http.StatusOK, "confirm", view{Title: "Delete the webhook", Section: "webhooks",
		D: confirmData{Action: "delete-webhook", Hook: hook}})
}

func (w *Web) deleteWebhook(c *gin.Context) {
	id, ok := w.hookID(c)
	if !ok {
		return
	}
	if err := w.webhooks.Delete(c.Request.Context(), id); err != nil {
		_ = c.Error(err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/admin/webhooks?msg=webhook-deleted")
}

// redeliver starts a new round of attempts for one delivery.
func (w *Web) redeliver(c *gin.Context) {
	id, ok := w.hookID(c)
	if !ok {
		return
	}
	deliveryID, err := uuid.Parse(c.Param("delivery_id"))
	if err != nil {
		_ = c.Error(app.NotFound("delivery"))
		return
	}
	if err := w.webhooks.Redeliver(c.Request.Context(), id, deliveryID); err != nil {
		_ = c.Error(err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/admin/webhooks/"+strconv.FormatInt(id, 10)+"?msg=redelivered")
}
