package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/schematest"
	"github.com/shipfile/shipfile/services/webhooks/internal/store"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

func TestStore(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool, servicetest.Keyring(t))
	ctx := context.Background()

	all := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://a.example/hook", Secret: "whsec_a"})
	only := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://b.example/hook", Secret: "whsec_b",
		Events: []string{"package.expired"}, PreviousSecret: "whsec_old", PreviousSecretUntil: time.Now().Add(time.Hour)})
	webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://c.example/hook", Secret: "whsec_c", Inactive: true})

	t.Run("active subscriptions by event", func(t *testing.T) {
		ids, err := st.ActiveSubscriptionIDs(ctx, "package.expired", time.Now())
		if err != nil || len(ids) != 2 || ids[0] != all || ids[1] != only {
			t.Fatalf("expired: %v %v", ids, err)
		}
		ids, err = st.ActiveSubscriptionIDs(ctx, "package.created", time.Now())
		if err != nil || len(ids) != 1 || ids[0] != all {
			t.Fatalf("created: %v %v", ids, err)
		}
		ids, err = st.ActiveSubscriptionIDs(ctx, "webhook.test", time.Now())
		if err != nil || len(ids) != 0 {
			t.Fatalf("webhook.test: %v %v", ids, err)
		}
		// An event older than the subscriptions (still in the stream when a new fan-out
		// consumer starts) goes to none of them.
		ids, err = st.ActiveSubscriptionIDs(ctx, "package.expired", time.Now().Add(-time.Hour))
		if err != nil || len(ids) != 0 {
			t.Fatalf("an event from before the subscriptions: %v %v", ids, err)
		}
	})

	id := app.DeliveryID("ev-1", only)
	nd := app.NewDelivery{ID: id, SubscriptionID: only, EventID: "ev-1", Event: "package.expired", Body: []byte(`{"a":1}`)}
	t.Run("insert is idempotent", func(t *testing.T) {
		for range 2 {
			if err := st.InsertDelivery(ctx, nd); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(webhooktest.Deliveries(t, pool, only)); n != 1 {
			t.Fatalf("%d rows", n)
		}
		gone := nd
		gone.ID, gone.SubscriptionID = uuid.NewString(), 999999
		if err := st.InsertDelivery(ctx, gone); !errors.Is(err, app.ErrNotFound) {
			t.Fatalf("unknown subscription: %v, want ErrNotFound", err)
		}
	})

	t.Run("load", func(t *testing.T) {
		d, err := st.Delivery(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		s := d.Subscription
		if d.Status != app.StatusPending || string(d.Body) != `{"a":1}` || s.ID != only || s.Secret != "whsec_b" ||
			s.PreviousSecret != "whsec_old" || s.PreviousSecretUntil.IsZero() || !s.Active || !s.FailingSince.IsZero() {
			t.Fatalf("%+v", d)
		}
		if _, err := st.Delivery(ctx, uuid.NewString()); !errors.Is(err, app.ErrNotFound) {
			t.Fatalf("missing delivery: %v", err)
		}
	})

	t.Run("attempts", func(t *testing.T) {
		n, err := st.RecordAttempt(ctx, app.AttemptRecord{DeliveryID: id, SubscriptionID: only, StatusCode: 500,
			Error: "the receiver answered 500", Duration: 12 * time.Millisecond, Excerpt: "oops", HasResponse: true, Status: app.StatusPending})
		if err != nil || n != 1 {
			t.Fatalf("first: %d %v", n, err)
		}
		first := webhooktest.SubscriptionState(t, pool, only).FailingSince
		if first == nil {
			t.Fatal("failing_since not set")
		}
		n, err = st.RecordAttempt(ctx, app.AttemptRecord{DeliveryID: id, SubscriptionID: only, Error: "refused", Status: app.StatusPending})
		if err != nil || n != 2 {
			t.Fatalf("second: %d %v", n, err)
		}
		if s := webhooktest.SubscriptionState(t, pool, only); !s.FailingSince.Equal(*first) {
			t.Fatalf("failing_since moved: %v → %v", first, s.FailingSince)
		}
		n, err = st.RecordAttempt(ctx, app.AttemptRecord{DeliveryID: id, SubscriptionID: only, StatusCode: 200, HasResponse: true,
			Succeeded: true, Status: app.StatusSucceeded})
		if err != nil || n != 3 {
			t.Fatalf("third: %d %v", n, err)
		}
		if s := webhooktest.SubscriptionState(t, pool, only); s.FailingSince != nil || s.LastSuccessAt == nil {
			t.Fatalf("after success: %+v", s)
		}
		as := webhooktest.Attempts(t, pool, id)
		if len(as) != 3 || *as[0].StatusCode != 500 || *as[0].Error != "the receiver answered 500" || as[0].DurationMS != 12 ||
			*as[0].ResponseExcerpt != "oops" || as[1].StatusCode != nil || as[1].ResponseExcerpt != nil || as[2].Error != nil {
			t.Fatalf("attempts %+v", as)
		}
		d := webhooktest.Deliveries(t, pool, only)[0]
		if d.Status != app.StatusSucceeded || d.Attempts != 3 || d.RoundAttempts != 3 || *d.LastStatusCode != 200 || d.LastError != nil {
			t.Fatalf("delivery %+v", d)
		}
		if err := st.MarkFailed(ctx, id, "subscription disabled"); !errors.Is(err, app.ErrNotFound) {
			t.Fatalf("MarkFailed on a succeeded delivery: %v", err)
		}
		if _, err := st.RecordAttempt(ctx, app.AttemptRecord{DeliveryID: uuid.NewString(), SubscriptionID: only, Status: app.StatusPending}); !errors.Is(err, app.ErrNotFound) {
			t.Fatalf("attempt of a missing delivery: %v", err)
		}
		if s := webhooktest.SubscriptionState(t, pool, only); s.FailingSince != nil {
			t.Fatal("the failed transaction of a missing delivery left failing_since set")
		}
	})

	t.Run("disable", func(t *testing.T) {
		id2 := app.DeliveryID("ev-2", all)
		if err := st.InsertDelivery(ctx, app.NewDelivery{ID: id2, SubscriptionID: all, EventID: "ev-2", Event: "package.created", Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordAttempt(ctx, app.AttemptRecord{DeliveryID: id2, SubscriptionID: all, StatusCode: 410, HasResponse: true,
			Error: "gone", Status: app.StatusFailed, DisableReason: "first reason"}); err != nil {
			t.Fatal(err)
		}
		s := webhooktest.SubscriptionState(t, pool, all)
		if s.Active || *s.DisabledReason != "first reason" || s.DisabledAt == nil {
			t.Fatalf("%+v", s)
		}
		if _, err := st.RecordAttempt(ctx, app.AttemptRecord{DeliveryID: id2, SubscriptionID: all, StatusCode: 410, HasResponse: true,
			Error: "gone", Status: app.StatusFailed, DisableReason: "second reason"}); err != nil {
			t.Fatal(err)
		}
		if s2 := webhooktest.SubscriptionState(t, pool, all); *s2.DisabledReason != "first reason" || !s2.DisabledAt.Equal(*s.DisabledAt) {
			t.Fatalf("an inactive subscription's reason was overwritten: %+v", s2)
		}
	})

	t.Run("mark failed and oldest pending", func(t *testing.T) {
		age, err := st.OldestPending(ctx)
		if err != nil || age != 0 {
			t.Fatalf("no pending: %s %v", age, err)
		}
		id3 := app.DeliveryID("ev-3", only)
		if err := st.InsertDelivery(ctx, app.NewDelivery{ID: id3, SubscriptionID: only, EventID: "ev-3", Event: "package.expired", Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE webhook_deliveries SET created_at = now() - interval '90 seconds' WHERE id = $1`, id3); err != nil {
			t.Fatal(err)
		}
		if age, err := st.OldestPending(ctx); err != nil || age < 90*time.Second || age > 100*time.Second {
			t.Fatalf("oldest pending %s %v", age, err)
		}
		if err := st.MarkFailed(ctx, id3, "subscription disabled"); err != nil {
			t.Fatal(err)
		}
		d, err := st.Delivery(ctx, id3)
		if err != nil || d.Status != app.StatusFailed || d.RoundAttempts != 0 {
			t.Fatalf("%+v %v", d, err)
		}
	})
}
