package webhookadmin

import (
	"testing"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events"
)

// TestUnitEventsAreValid: the webhook.test event has an id, a type that matches its
// data (events.TypeOf) and marshals for the outbox; a redelivery job marshals too and
// has a message id of its own each time.
func TestUnitEventsAreValid(t *testing.T) {
	t.Parallel()
	e := webhookTest(3)
	if _, err := events.EventMessage(e); err != nil || events.TypeOf(e) != e.GetType() || e.GetEventId() == "" {
		t.Errorf("%s: %v, data of %q, id %q", e.GetType(), err, events.TypeOf(e), e.GetEventId())
	}
	if got := e.GetWebhookTest(); got.GetHookId() != 3 || got.GetMessage() != WebhookTestMessage {
		t.Errorf("webhook.test data = %v", got)
	}
	d := uuid.NewString()
	a, b := redeliveryJob(3, d), redeliveryJob(3, d)
	if a.MsgID == b.MsgID || a.Job.GetDeliveryId() != d || a.Job.GetHookId() != 3 {
		t.Errorf("redelivery jobs %q %q of %v", a.MsgID, b.MsgID, a.Job)
	}
	if _, err := events.WebhookJobMessage(a.Job, a.MsgID); err != nil {
		t.Errorf("WebhookJobMessage: %v", err)
	}
}
