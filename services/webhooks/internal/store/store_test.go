package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
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
		Events: []string{"package.expired"}, PreviousSecret: "whsec_old", PreviousSecretUntil: time.Now().Add(time.Hour),
		MaxInFlight: 3, RateLimit: 50})
	off := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://c.example/hook", Secret: "whsec_c", Inactive: true})

	t.Run("subscriptions", func(t *testing.T) {
		subs, err := st.Subscriptions(ctx)
		if err != nil || len(subs) != 3 {
			t.Fatalf("%+v %v", subs, err)
		}
		a, b, c := subs[0], subs[1], subs[2]
		if a.ID != all || a.Events != nil || a.Secret != "whsec_a" || !a.Active || a.MaxInFlight != 16 || a.RateLimit != 0 || a.CreatedAt.IsZero() {
			t.Fatalf("all: %+v", a)
		}
		if b.ID != only || !slices.Equal(b.Events, []string{"package.expired"}) || b.PreviousSecret != "whsec_old" ||
			b.PreviousSecretUntil.IsZero() || b.MaxInFlight != 3 || b.RateLimit != 50 {
			t.Fatalf("only: %+v", b)
		}
		if c.ID != off || c.Active {
			t.Fatalf("inactive: %+v", c)
		}
		one, err := st.Subscription(ctx, only)
		if err != nil || one.URL != b.URL || one.Secret != b.Secret {
			t.Fatalf("one: %+v %v", one, err)
		}
		if _, err := st.Subscription(ctx, 999999); !errors.Is(err, app.ErrNotFound) {
			t.Fatalf("missing: %v", err)
		}
		if last, err := st.LastSubscriptionID(ctx); err != nil || last != off {
			t.Fatalf("last id %d %v", last, err)
		}
	})

	id := app.DeliveryID("ev-1", only)
	nd := app.NewDelivery{ID: id, SubscriptionID: only, EventID: "ev-1", Event: "package.expired", Body: []byte(`{"a":1}`)}
	t.Run("insert is idempotent", func(t *testing.T) {
		for range 2 {
			if err := st.InsertDeliveries(ctx, []app.NewDelivery{nd}); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(webhooktest.Deliveries(t, pool, only)); n != 1 {
			t.Fatalf("%d rows", n)
		}
	})

	t.Run("load", func(t *testing.T) {
		missing := uuid.NewString()
		ds, err := st.Deliveries(ctx, []string{id, missing})
		if err != nil || len(ds) != 1 {
			t.Fatalf("%+v %v", ds, err)
		}
		d := ds[id]
		if d.Status != app.StatusPending || string(d.Body) != `{"a":1}` || d.SubscriptionID != only || d.Event != "package.expired" {
			t.Fatalf("%+v", d)
		}
	})

	t.Run("attempts in one group commit", func(t *testing.T) {
		// A delivery without a row yet: its row is written with its first attempt.
		fresh := app.DeliveryID("ev-2", only)
		created := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		n, err := st.RecordAttempts(ctx, []app.AttemptRecord{
			{DeliveryID: id, SubscriptionID: only, StatusCode: 500, Error: "the receiver answered 500", Duration: 12 * time.Millisecond,
				Excerpt: "oops", HasResponse: true, Status: app.StatusPending},
			{DeliveryID: fresh, SubscriptionID: only, EventID: "ev-2", Event: "package.expired", Body: []byte(`{"b":2}`),
				CreatedAt: created, StatusCode: 204, HasResponse: true, Succeeded: true, Status: app.StatusSucceeded},
			// The same delivery twice in one batch: both counted, in order.
			{DeliveryID: id, SubscriptionID: only, Error: "refused", Status: app.StatusPending},
		})
		if err != nil || n[id].Attempt != 2 || n[fresh].Attempt != 1 || len(n) != 2 {
			t.Fatalf("%v %v", n, err)
		}
		ds, err := st.Deliveries(ctx, []string{fresh})
		if f := ds[fresh]; err != nil || f.Status != app.StatusSucceeded || f.Attempts != 1 || f.RoundAttempts != 1 ||
			f.EventID != "ev-2" || f.Event != "package.expired" || string(f.Body) != `{"b":2}` || !f.CreatedAt.Equal(created) {
			t.Fatalf("the fresh delivery's row: %+v %v", f, err)
		}
		if as := webhooktest.Attempts(t, pool, fresh); len(as) != 1 || as[0].Attempt != 1 || *as[0].StatusCode != 204 || as[0].Error != nil {
			t.Fatalf("the fresh delivery's attempts: %+v", as)
		}
		n, err = st.RecordAttempts(ctx, []app.AttemptRecord{{DeliveryID: id, SubscriptionID: only, StatusCode: 200, HasResponse: true,
			Succeeded: true, Status: app.StatusSucceeded}})
		if err != nil || n[id].Attempt != 3 {
			t.Fatalf("third: %v %v", n, err)
		}
		as := webhooktest.Attempts(t, pool, id)
		if len(as) != 3 || *as[0].StatusCode != 500 || *as[0].Error != "the receiver answered 500" || as[0].DurationMS != 12 ||
			*as[0].ResponseExcerpt != "oops" || as[1].StatusCode != nil || as[1].ResponseExcerpt != nil || as[2].Error != nil {
			t.Fatalf("attempts %+v", as)
		}
		var d webhooktest.DeliveryRow
		for _, r := range webhooktest.Deliveries(t, pool, only) {
			if r.ID == id {
				d = r
			}
		}
		if d.Status != app.StatusSucceeded || d.Attempts != 3 || d.RoundAttempts != 3 || *d.LastStatusCode != 200 || d.LastError != nil {
			t.Fatalf("delivery %+v", d)
		}
		if err := st.MarkFailed(ctx, app.Delivery{ID: nd.ID, SubscriptionID: only, EventID: nd.EventID, Event: nd.Event, Body: nd.Body}, "subscription disabled"); !errors.Is(err, app.ErrNotFound) {
			t.Fatalf("MarkFailed on a succeeded delivery: %v", err)
		}
		// Nothing of the hot path touched the subscription's row.
		if s := webhooktest.SubscriptionState(t, pool, only); s.FailingSince != nil || s.LastSuccessAt != nil {
			t.Fatalf("an attempt wrote the subscription's health: %+v", s)
		}
	})

	t.Run("disable on 410", func(t *testing.T) {
		if err := st.DisableSubscription(ctx, all, "first reason"); err != nil {
			t.Fatal(err)
		}
		s := webhooktest.SubscriptionState(t, pool, all)
		if s.Active || *s.DisabledReason != "first reason" || s.DisabledAt == nil {
			t.Fatalf("%+v", s)
		}
		if err := st.DisableSubscription(ctx, all, "second reason"); err != nil {
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
		if err := st.InsertDeliveries(ctx, []app.NewDelivery{{ID: id3, SubscriptionID: only, EventID: "ev-3", Event: "package.expired", Body: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE webhook_deliveries SET created_at = now() - interval '90 seconds' WHERE id = $1`, id3); err != nil {
			t.Fatal(err)
		}
		if age, err := st.OldestPending(ctx); err != nil || age < 90*time.Second || age > 100*time.Second {
			t.Fatalf("oldest pending %s %v", age, err)
		}
		if err := st.MarkFailed(ctx, app.Delivery{ID: id3}, "subscription disabled"); err != nil {
			t.Fatal(err)
		}
		// A delivery without a row (no attempt yet) gets one, failed.
		id4 := app.DeliveryID("ev-4", only)
		if err := st.MarkFailed(ctx, app.Delivery{ID: id4, SubscriptionID: only, EventID: "ev-4", Event: "package.expired", Body: []byte(`{}`)},
			"subscription disabled"); err != nil {
			t.Fatal(err)
		}
		ds, err := st.Deliveries(ctx, []string{id3, id4})
		for _, id := range []string{id3, id4} {
			if d := ds[id]; err != nil || d.Status != app.StatusFailed || d.RoundAttempts != 0 || d.Attempts != 0 {
				t.Fatalf("%s: %+v %v", id, d, err)
			}
		}
	})

	t.Run("heartbeat", func(t *testing.T) {
		for _, want := range []int{1, 1} {
			if n, err := st.Heartbeat(ctx, "a", time.Minute); err != nil || n != want {
				t.Fatalf("a: %d %v, want %d", n, err, want)
			}
		}
		if n, err := st.Heartbeat(ctx, "b", time.Minute); err != nil || n != 2 {
			t.Fatalf("b: %d %v", n, err)
		}
		if _, err := pool.Exec(ctx, `UPDATE webhook_dispatchers SET seen_at = now() - interval '2 minutes' WHERE instance_id = 'b'`); err != nil {
			t.Fatal(err)
		}
		if n, err := st.Heartbeat(ctx, "a", time.Minute); err != nil || n != 1 {
			t.Fatalf("after b went quiet: %d %v", n, err)
		}
		if err := st.Leave(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHealthPass: last_success_at and failing_since come from the attempt log, the
// streak survives passes that see it again, and a subscription failing too long is
// disabled (those failing for less are not).
func TestHealthPass(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool, servicetest.Keyring(t))
	ctx := context.Background()
	hook := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://a.example/hook", Secret: "whsec_a"})
	young := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://b.example/hook", Secret: "whsec_b"})
	attempt := func(hookID int64, code int, ago time.Duration) {
		t.Helper()
		id := uuid.NewString()
		if err := st.InsertDeliveries(ctx, []app.NewDelivery{{ID: id, SubscriptionID: hookID, EventID: id, Event: "package.created", Body: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordAttempts(ctx, []app.AttemptRecord{{DeliveryID: id, SubscriptionID: hookID, StatusCode: code, HasResponse: code != 0, Status: app.StatusPending}}); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE webhook_attempts SET created_at = now() - $2::interval WHERE delivery_id = $1`, id, ago); err != nil {
			t.Fatal(err)
		}
	}
	pass := func(disableAfter time.Duration) []int64 {
		t.Helper()
		disabled, ran, err := st.Health(ctx, time.Hour, disableAfter, "failing too long")
		if err != nil || !ran {
			t.Fatalf("pass: %v %v", ran, err)
		}
		return disabled
	}
	attempt(hook, 200, 50*time.Minute)
	attempt(hook, 500, 40*time.Minute)
	attempt(hook, 0, 30*time.Minute)
	attempt(young, 500, time.Minute)
	pass(0)
	s := webhooktest.SubscriptionState(t, pool, hook)
	if s.LastSuccessAt == nil || s.FailingSince == nil || time.Since(*s.FailingSince) < 39*time.Minute || time.Since(*s.FailingSince) > 41*time.Minute {
		t.Fatalf("after a success then failures: %+v", s)
	}
	pass(0)
	if s2 := webhooktest.SubscriptionState(t, pool, hook); !s2.FailingSince.Equal(*s.FailingSince) || !s2.LastSuccessAt.Equal(*s.LastSuccessAt) {
		t.Fatalf("a second pass moved the streak: %+v → %+v", s, s2)
	}
	if got := pass(35 * time.Minute); !slices.Equal(got, []int64{hook}) {
		t.Fatalf("disabled %v, want [%d]", got, hook)
	}
	if s := webhooktest.SubscriptionState(t, pool, hook); s.Active || *s.DisabledReason != "failing too long" {
		t.Fatalf("%+v", s)
	}
	if s := webhooktest.SubscriptionState(t, pool, young); !s.Active || s.FailingSince == nil {
		t.Fatalf("young: %+v", s)
	}
	attempt(young, 204, 0)
	pass(35 * time.Minute)
	if s := webhooktest.SubscriptionState(t, pool, young); s.FailingSince != nil || s.LastSuccessAt == nil {
		t.Fatalf("after a success: %+v", s)
	}
}

// TestDeletedSubscriptionsDeliveriesAreSwept: without the foreign key, the deliveries of
// a subscription deleted while a fan-out wrote them are removed by the sweep, and
// only those.
func TestDeletedSubscriptionsDeliveriesAreSwept(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool, servicetest.Keyring(t))
	ctx := context.Background()
	keep := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://a.example/hook", Secret: "whsec_a"})
	gone := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://b.example/hook", Secret: "whsec_b"})
	if _, err := pool.Exec(ctx, `DELETE FROM webhook_subscriptions WHERE id = $1`, gone); err != nil {
		t.Fatal(err)
	}
	var ds []app.NewDelivery
	for _, h := range []int64{keep, gone} {
		ds = append(ds, app.NewDelivery{ID: app.DeliveryID("ev", h), SubscriptionID: h, EventID: "ev", Event: "package.created", Body: []byte(`{}`)})
	}
	if err := st.InsertDeliveries(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if n, err := st.DeleteDeliveriesOf(ctx, []int64{keep, gone}); err != nil || n != 1 {
		t.Fatalf("swept %d %v", n, err)
	}
	if len(webhooktest.Deliveries(t, pool, keep)) != 1 || len(webhooktest.Deliveries(t, pool, gone)) != 0 {
		t.Fatal("the wrong deliveries were swept")
	}
}

// TestListenPushesSubscriptionChanges: a change that matters to deliveries (disable,
// delete, create) is announced; the health columns alone are not.
func TestListenPushesSubscriptionChanges(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool, servicetest.Keyring(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hook := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://a.example/hook", Secret: "whsec_a"})
	ready := make(chan struct{})
	got := make(chan int64, 10)
	go func() {
		_ = st.Listen(ctx, func() { close(ready) }, func(id int64) { got <- id })
	}()
	<-ready
	expect := func(what string, want int64) {
		t.Helper()
		select {
		case id := <-got:
			if id != want {
				t.Fatalf("%s: announced %d, want %d", what, id, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: nothing announced", what)
		}
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`UPDATE webhook_subscriptions SET last_success_at = now(), failing_since = NULL, updated_at = now() WHERE id = $1`, hook)
	exec(`UPDATE webhook_subscriptions SET active = false WHERE id = $1`, hook)
	expect("disable", hook) // and not the health update before it
	exec(`UPDATE webhook_subscriptions SET max_in_flight = 5 WHERE id = $1`, hook)
	expect("max_in_flight", hook)
	exec(`DELETE FROM webhook_subscriptions WHERE id = $1`, hook)
	expect("delete", hook)
	other := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://b.example/hook", Secret: "whsec_b"})
	expect("create", other)
}
