package webhookadmin

import (
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// webhookTest is the event of a subscription's Test button; the dispatcher sends it to
// that one subscription whatever its selection.
func webhookTest(hookID int64) *eventsv1.Envelope {
	e := events.NewEnvelope(events.TypeWebhookTest, time.Now().UTC())
	e.Data = &eventsv1.Envelope_WebhookTest{WebhookTest: &eventsv1.WebhookTest{HookId: hookID, Message: WebhookTestMessage}}
	return e
}

// redeliveryJob asks the dispatcher to try a delivery again. Each redelivery has a
// message id of its own, so the stream's duplicate window never drops a second one.
func redeliveryJob(hookID int64, deliveryID string) app.WebhookJob {
	return app.WebhookJob{
		Job:   &eventsv1.WebhookJob{DeliveryId: deliveryID, HookId: hookID},
		MsgID: deliveryID + "/redeliver/" + events.NewEventID(),
	}
}
