package transport_test

import (
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

// TestStoppingInstanceWritesTheJournal: the deliveries a lone dispatcher made at their
// first try are all in the delivery log, one attempt each, the moment it has stopped,
// though it stops while the journal's writer gathers records (no other instance is left
// to write them).
func TestStoppingInstanceWritesTheJournal(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	hook := f.subscribe(t, rc, nil)
	inst := f.start(t, webhooktest.Config{})

	const n = 200
	for range n {
		f.streams.Publish(t, f.js, webhooktest.Envelope(events.TypePackageFileUploaded, 0))
	}
	rc.WaitFor(t, 60*time.Second, "every delivery", func(reqs []webhooktest.Request) bool {
		return len(distinct(reqs)) >= n
	})
	inst.Stop(t)

	ds := webhooktest.Deliveries(t, f.pool, hook)
	succeeded := 0
	for _, d := range ds {
		if d.Status == app.StatusSucceeded && len(webhooktest.Attempts(t, f.pool, d.ID)) == 1 {
			succeeded++
		}
	}
	if len(ds) != n || succeeded != n {
		t.Fatalf("%d deliveries in the log, %d succeeded with one attempt, once the dispatcher stopped; want %d", len(ds), succeeded, n)
	}
}
