package transport

import (
	"slices"
	"testing"

	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// TestHookFilters: a subscription's consumer takes the events it selects (every event
// when it selects all), webhook.test and its due jobs, with no two subjects overlapping
// (NATS refuses a consumer whose filters overlap).
func TestHookFilters(t *testing.T) {
	o := DefaultOptions()
	cases := []struct {
		sub  app.Subscription
		want []string
	}{
		{app.Subscription{ID: 7}, []string{"shipfile.events.>", "shipfile.webhook-due.7"}},
		{app.Subscription{ID: 8, Events: []string{"package.finalized", "package.created", "package.finalized"}},
			[]string{"shipfile.events.package.created", "shipfile.events.package.finalized", "shipfile.events.webhook.test", "shipfile.webhook-due.8"}},
		{app.Subscription{ID: 9, Events: []string{"webhook.test"}}, []string{"shipfile.events.webhook.test", "shipfile.webhook-due.9"}},
		{app.Subscription{ID: 10, Events: []string{}}, []string{"shipfile.events.webhook.test", "shipfile.webhook-due.10"}},
	}
	for _, c := range cases {
		if got := o.HookFilters(c.sub); !slices.Equal(got, c.want) {
			t.Errorf("HookFilters(%d, %v) = %v, want %v", c.sub.ID, c.sub.Events, got, c.want)
		}
	}
}
