package store_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/outbox"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/store"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

// TestOutboxNumbersPackageEvents: the outbox's trigger gives each package's events the
// numbers 1, 2, … in the order they are written, in the envelope (package_seq), whoever
// writes them and however many a transaction writes; other messages and payloads that
// are not envelopes are stored as they were written.
func TestOutboxNumbersPackageEvents(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	ctx := context.Background()
	a, b := uuid.NewString(), uuid.NewString()

	write := func(msgs ...outbox.Message) {
		t.Helper()
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return outbox.Insert(ctx, tx, msgs...) }); err != nil {
			t.Fatal(err)
		}
	}
	event := func(typ, pkg string) outbox.Message {
		t.Helper()
		m, err := events.EventMessage(webhooktest.PackageEnvelope(typ, pkg, 0))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	garbage := outbox.Message{ID: uuid.NewString(), Subject: events.Subject(events.TypePackageCreated), Data: []byte{0x0a, 0xff, 0x01}}
	test, err := events.EventMessage(webhooktest.Envelope(events.TypeWebhookTest, 7))
	if err != nil {
		t.Fatal(err)
	}
	written := []outbox.Message{event(events.TypePackageCreated, a)}
	written = append(written, event(events.TypePackageCreated, b), event(events.TypePackageFileUploaded, a),
		event(events.TypePackageFinalized, a)) // one transaction, several events
	write(written[0])
	write(written[1:]...)
	write(garbage, test)
	last := event(events.TypePackageDeleted, b)
	write(last)
	written = append(written, garbage, test, last)

	rows, err := pool.Query(ctx, `SELECT msg_id, payload FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	payloads := map[string][]byte{}
	for rows.Next() {
		var id string
		var p []byte
		if err := rows.Scan(&id, &p); err != nil {
			t.Fatal(err)
		}
		payloads[id] = p
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{written[0].ID: 1, written[1].ID: 1, written[2].ID: 2, written[3].ID: 3, last.ID: 2}
	for id, seq := range want {
		env, err := events.UnmarshalEnvelope(payloads[id])
		if err != nil {
			t.Fatalf("event %s: %v", id, err)
		}
		if env.GetPackageSeq() != seq {
			t.Errorf("event %s (%s): package_seq %d, want %d", id, env.GetType(), env.GetPackageSeq(), seq)
		}
		_, body, err := app.RenderBody(env)
		if err != nil {
			t.Fatal(err)
		}
		orig, err := events.UnmarshalEnvelope(messageData(written, id))
		if err != nil {
			t.Fatal(err)
		}
		if _, origBody, _ := app.RenderBody(orig); !bytes.Equal(body, origBody) {
			t.Errorf("event %s: the body changed:\n%s\n%s", id, body, origBody)
		}
	}
	for _, m := range []outbox.Message{garbage, test} {
		if !bytes.Equal(payloads[m.ID], m.Data) {
			t.Errorf("%s: payload %x, want it as written (%x)", m.Subject, payloads[m.ID], m.Data)
		}
	}
}

func messageData(ms []outbox.Message, id string) []byte {
	for _, m := range ms {
		if m.ID == id {
			return m.Data
		}
	}
	return nil
}

// TestOrderGate: a package's events on an ordered subscription go one after the other;
// a later one waits (its row written) until the earlier is done, an event the
// subscription does not take is passed over, and a package whose next event never
// comes is moved past it.
func TestOrderGate(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool, servicetest.Keyring(t))
	ctx := context.Background()
	hook := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://a.example/hook", Secret: "whsec_a", Ordering: app.OrderingPackage})
	pkg := uuid.NewString()
	del := func(seq uint64) app.Delivery {
		ev := uuid.NewString()
		return app.Delivery{ID: app.DeliveryID(ev, hook), SubscriptionID: hook, EventID: ev, Event: events.TypePackageFinalized,
			Body: []byte(`{}`), PackageID: pkg, PackageSeq: seq}
	}
	gate := func(d app.Delivery, take bool, want string) string {
		t.Helper()
		got, released, err := st.Gate(ctx, d, take)
		if err != nil || got != want {
			t.Fatalf("gate of event %d: %q %v, want %q", d.PackageSeq, got, err, want)
		}
		return released
	}
	finish := func(seq uint64, want string) {
		t.Helper()
		got, err := st.Finish(ctx, hook, pkg, seq)
		if err != nil || got != want {
			t.Fatalf("finish of event %d: released %q %v, want %q", seq, got, err, want)
		}
	}

	// Event 2 comes first: it waits for event 1 (the package is newer than the
	// subscription, so it starts at 1).
	d1, d2, d4 := del(1), del(2), del(4)
	gate(d2, true, app.GateWait)
	gate(d2, true, app.GateWait) // handed out again: still waits, one row
	rows, err := st.Deliveries(ctx, []string{d2.ID})
	if r := rows[d2.ID]; err != nil || r.Status != app.StatusPending || r.Attempts != 0 || r.PackageSeq != 2 || r.PackageID != pkg {
		t.Fatalf("the waiting delivery's row: %+v %v", r, err)
	}
	gate(d1, true, app.GateGo)
	gate(del(3), false, app.GateWait) // not taken: passed over once its turn comes
	gate(d4, true, app.GateWait)
	finish(2, "")    // not the next: nothing moves
	finish(1, d2.ID) // event 1 done: event 2 goes
	gate(d1, true, app.GateLate)
	finish(2, d4.ID) // event 3 is passed over
	finish(4, "")

	// Event 6 waits for event 5, which never comes: after a while it goes.
	d6 := del(6)
	gate(d6, true, app.GateWait)
	if rs, err := st.Unstick(ctx, time.Hour, 10); err != nil || len(rs) != 0 {
		t.Fatalf("unstuck before its time: %+v %v", rs, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE webhook_order_heads SET updated_at = now() - interval '2 minutes'`); err != nil {
		t.Fatal(err)
	}
	rs, err := st.Unstick(ctx, time.Minute, 10)
	if err != nil || len(rs) != 1 || rs[0].DeliveryID != d6.ID || rs[0].SubscriptionID != hook {
		t.Fatalf("unstick: %+v %v, want %s", rs, err, d6.ID)
	}
	finish(6, "")
	if released := gate(del(7), false, app.GateSkip); released != "" {
		t.Fatalf("a skip released %q", released)
	}

	// The subscription is no longer ordered: what waits goes, and its order is forgotten.
	d9 := del(9)
	gate(d9, true, app.GateWait)
	if rs, err := st.ReleaseUnordered(ctx, 100); err != nil || len(rs) != 0 {
		t.Fatalf("released while still ordered: %+v %v", rs, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE webhook_subscriptions SET ordering = 'none' WHERE id = $1`, hook); err != nil {
		t.Fatal(err)
	}
	rs, err = st.ReleaseUnordered(ctx, 100)
	if err != nil || len(rs) != 1 || rs[0].DeliveryID != d9.ID {
		t.Fatalf("released once unordered: %+v %v, want %s", rs, err, d9.ID)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_order_heads) + (SELECT count(*) FROM webhook_order_waits)`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d rows of the order left (%v)", left, err)
	}
}

// TestAttemptsCommitMovesTheOrder: the group commit of attempts moves the packages of
// the ordered deliveries it ends on, in its own transaction, and says which delivery
// each released; a package's first event, which had no place yet, gets one.
func TestAttemptsCommitMovesTheOrder(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool, servicetest.Keyring(t))
	ctx := context.Background()
	hook := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://a.example/hook", Secret: "whsec_a", Ordering: app.OrderingPackage})
	a, b := uuid.NewString(), uuid.NewString()
	del := func(pkg string, seq uint64) app.Delivery {
		ev := uuid.NewString()
		return app.Delivery{ID: app.DeliveryID(ev, hook), SubscriptionID: hook, EventID: ev, Event: events.TypePackageFinalized,
			Body: []byte(`{}`), PackageID: pkg, PackageSeq: seq}
	}
	rec := func(d app.Delivery, status string) app.AttemptRecord {
		return app.AttemptRecord{DeliveryID: d.ID, SubscriptionID: hook, EventID: d.EventID, Event: d.Event, Body: d.Body,
			PackageID: d.PackageID, PackageSeq: d.PackageSeq, StatusCode: 200, HasResponse: true, Status: status,
			Succeeded: status == app.StatusSucceeded, FinishOrder: status != app.StatusPending}
	}
	a1, a2, b1, b2 := del(a, 1), del(a, 2), del(b, 1), del(b, 2)
	if d, _, err := st.Gate(ctx, a2, true); err != nil || d != app.GateWait {
		t.Fatalf("a2: %q %v", d, err)
	}
	got, err := st.RecordAttempts(ctx, []app.AttemptRecord{rec(b1, app.StatusSucceeded), rec(a1, app.StatusSucceeded)})
	if err != nil || got[a1.ID].Attempt != 1 || got[a1.ID].Released != a2.ID || got[b1.ID].Released != "" {
		t.Fatalf("recorded %+v %v, want a1 to release %s", got, err, a2.ID)
	}
	// b had no place: its first event's end gives it one, so its second goes at once.
	if d, _, err := st.Gate(ctx, b2, true); err != nil || d != app.GateGo {
		t.Fatalf("b2: %q %v, want go", d, err)
	}
	// A retry to come does not move the package on.
	got, err = st.RecordAttempts(ctx, []app.AttemptRecord{rec(b2, app.StatusPending)})
	if err != nil || got[b2.ID].Released != "" {
		t.Fatalf("pending: %+v %v", got, err)
	}
	b3 := del(b, 3)
	if d, _, err := st.Gate(ctx, b3, true); err != nil || d != app.GateWait {
		t.Fatalf("b3 while b2 is retried: %q %v, want wait", d, err)
	}
	// b2 succeeds: b3 goes. c, whose events never waited, moves on in one statement;
	// a late record of c changes nothing.
	c1 := del(uuid.NewString(), 1)
	c2 := del(c1.PackageID, 2)
	got, err = st.RecordAttempts(ctx, []app.AttemptRecord{rec(b2, app.StatusSucceeded), rec(c1, app.StatusSucceeded)})
	if err != nil || got[b2.ID].Released != b3.ID || got[c1.ID].Released != "" {
		t.Fatalf("recorded %+v %v, want b2 to release %s", got, err, b3.ID)
	}
	if _, err := st.RecordAttempts(ctx, []app.AttemptRecord{rec(c2, app.StatusSucceeded)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordAttempts(ctx, []app.AttemptRecord{rec(c1, app.StatusSucceeded)}); err != nil {
		t.Fatal(err)
	}
	heads, err := st.Heads(ctx, []int64{hook, hook, hook}, []string{b, c1.PackageID, uuid.NewString()})
	if err != nil || heads[0] != 3 || heads[1] != 3 || heads[2] != 0 {
		t.Fatalf("heads %v %v, want [3 3 0]", heads, err)
	}
}

// TestOrderForgetDone: the places of packages with nothing left to do that have not
// moved for a while leave the order, and the others stay (an event waiting, a delivery
// pending, an event numbered but not done, a place that moved lately); a package's
// events after its place left go in their order, at once, and an earlier one goes as
// late, whichever way its end is recorded. A pass removes no more than it is told.
func TestOrderForgetDone(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool, servicetest.Keyring(t))
	ctx := context.Background()
	hook := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://a.example/hook", Secret: "whsec_a", Ordering: app.OrderingPackage})
	del := func(pkg string, seq uint64) app.Delivery {
		ev := uuid.NewString()
		return app.Delivery{ID: app.DeliveryID(ev, hook), SubscriptionID: hook, EventID: ev, Event: events.TypePackageFinalized,
			Body: []byte(`{}`), PackageID: pkg, PackageSeq: seq}
	}
	// numbered says the outbox numbered seq events of pkg (its trigger's counter).
	numbered := func(pkg string, seq int64) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO package_event_seqs (package_id, seq) VALUES ($1, $2)
			ON CONFLICT (package_id) DO UPDATE SET seq = excluded.seq`, pkg, seq); err != nil {
			t.Fatal(err)
		}
	}
	gate := func(d app.Delivery, want string) {
		t.Helper()
		if got, _, err := st.Gate(ctx, d, true); err != nil || got != want {
			t.Fatalf("gate of %s event %d: %q %v, want %q", d.PackageID, d.PackageSeq, got, err, want)
		}
	}
	finish := func(pkg string, seq uint64, want string) {
		t.Helper()
		if got, err := st.Finish(ctx, hook, pkg, seq); err != nil || got != want {
			t.Fatalf("finish of %s event %d: released %q %v, want %q", pkg, seq, got, err, want)
		}
	}
	record := func(d app.Delivery, status string) app.Recorded {
		t.Helper()
		got, err := st.RecordAttempts(ctx, []app.AttemptRecord{{DeliveryID: d.ID, SubscriptionID: hook, EventID: d.EventID,
			Event: d.Event, Body: d.Body, PackageID: d.PackageID, PackageSeq: d.PackageSeq, StatusCode: 200, HasResponse: true,
			Status: status, Succeeded: status == app.StatusSucceeded, FinishOrder: status != app.StatusPending}})
		if err != nil {
			t.Fatal(err)
		}
		return got[d.ID]
	}
	head := func(pkg string) uint64 {
		t.Helper()
		h, err := st.Heads(ctx, []int64{hook}, []string{pkg})
		if err != nil {
			t.Fatal(err)
		}
		return h[0]
	}
	idle := func() {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE webhook_order_heads SET updated_at = now() - interval '2 hours'`); err != nil {
			t.Fatal(err)
		}
	}
	forget := func(limit, want int) {
		t.Helper()
		if n, err := st.ForgetDone(ctx, time.Hour, limit); err != nil || n != want {
			t.Fatalf("forget: %d %v, want %d", n, err, want)
		}
	}

	done, waiting, pending, behind, recent := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	// done: its three events delivered.
	numbered(done, 3)
	for seq := uint64(1); seq <= 3; seq++ {
		finish(done, seq, "")
	}
	// waiting: event 3 waits for event 2.
	numbered(waiting, 3)
	finish(waiting, 1, "")
	gate(del(waiting, 3), app.GateWait)
	// pending: its events done, but a redelivery of event 1 is being retried.
	numbered(pending, 2)
	finish(pending, 1, "")
	finish(pending, 2, "")
	record(del(pending, 1), app.StatusPending)
	// behind: event 2 numbered and not done yet.
	numbered(behind, 2)
	finish(behind, 1, "")
	idle()
	// recent: done, but its place moved just now.
	numbered(recent, 1)
	finish(recent, 1, "")

	if n, err := st.ForgetDone(ctx, 3*time.Hour, 100); err != nil || n != 0 {
		t.Fatalf("forget before its time: %d %v", n, err)
	}
	forget(100, 1)
	for pkg, want := range map[string]uint64{done: 0, waiting: 2, pending: 3, behind: 2, recent: 2} {
		if got := head(pkg); got != want {
			t.Errorf("after the pass, package %s's place: %d, want %d", pkg, got, want)
		}
	}
	var doneSeq *int64
	if err := pool.QueryRow(ctx, `SELECT order_done_seq FROM package_event_seqs WHERE package_id = $1`, done).Scan(&doneSeq); err != nil || doneSeq == nil || *doneSeq != 3 {
		t.Fatalf("order_done_seq of the package removed: %v %v, want 3", doneSeq, err)
	}

	// Two more events of done come, the later first: it waits for the earlier, which
	// goes at once and releases it; a redelivery of an old one goes as late.
	numbered(done, 5)
	d4, d5 := del(done, 4), del(done, 5)
	gate(d5, app.GateWait)
	gate(d4, app.GateGo)
	gate(del(done, 2), app.GateLate)
	if got := record(d4, app.StatusSucceeded); got.Released != d5.ID {
		t.Fatalf("event 4 done released %q, want event 5 (%s)", got.Released, d5.ID)
	}
	if got := record(d5, app.StatusSucceeded); got.Released != "" || head(done) != 6 {
		t.Fatalf("event 5 done: released %q, place %d, want none and 6", got.Released, head(done))
	}

	// Its place leaves again (recent's too, idle now); the end of a late event, recorded
	// alone or in the group commit of attempts, puts it back after what is done, not
	// after the late event.
	idle()
	forget(100, 2)
	finish(done, 2, "")
	if got := head(done); got != 6 {
		t.Fatalf("after a late event's finish: place %d, want 6", got)
	}
	idle()
	forget(100, 1)
	record(del(done, 3), app.StatusSucceeded)
	if got := head(done); got != 6 {
		t.Fatalf("after a late event's recorded end: place %d, want 6", got)
	}
	gate(del(done, 6), app.GateGo)

	// A pass removes at most its limit.
	many := make([]string, 5)
	for i := range many {
		many[i] = uuid.NewString()
		numbered(many[i], 1)
		finish(many[i], 1, "")
	}
	idle()
	forget(2, 2)
	forget(100, 4) // the three others and done
	forget(100, 0)
}
