package store_test

import (
	"testing"

	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/store"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

// TestRecordJournalWritesEachAttemptOnce: the journal's records write their deliveries'
// rows with one attempt each; the same records written again (a journal message handed
// out again after its commit) add nothing, while a new delivery in the same batch is
// written.
func TestRecordJournalWritesEachAttemptOnce(t *testing.T) {
	t.Parallel()
	ctx, pool := onePool(t)
	st := store.New(pool, nil)
	hook := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://a.example/hook", Secret: "whsec_a"})
	rec := func(ev string) app.AttemptRecord {
		return app.AttemptRecord{DeliveryID: app.DeliveryID(ev, hook), SubscriptionID: hook, EventID: ev,
			Event: "package.created", Body: []byte(`{"event":"package.created"}`), StatusCode: 200, HasResponse: true,
			Status: app.StatusSucceeded, Succeeded: true}
	}
	attempts := func(ev string) (status string, n, logged int) {
		t.Helper()
		id := app.DeliveryID(ev, hook)
		if err := pool.QueryRow(ctx, `SELECT d.status, d.attempts, (SELECT count(*) FROM webhook_attempts a WHERE a.delivery_id = d.id)
			FROM webhook_deliveries d WHERE d.id = $1`, id).Scan(&status, &n, &logged); err != nil {
			t.Fatalf("delivery %s: %v", ev, err)
		}
		return status, n, logged
	}

	if err := st.RecordJournal(ctx, []app.AttemptRecord{rec("a"), rec("b")}); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordJournal(ctx, []app.AttemptRecord{rec("b"), rec("a"), rec("c")}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"a", "b", "c"} {
		if status, n, logged := attempts(ev); status != app.StatusSucceeded || n != 1 || logged != 1 {
			t.Errorf("delivery %s: %s with %d attempts, %d logged; want succeeded with one", ev, status, n, logged)
		}
	}
}
