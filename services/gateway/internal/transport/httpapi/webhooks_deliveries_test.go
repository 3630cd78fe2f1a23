package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// insertDelivery writes a delivery of the subscription as the dispatcher would.
func (a *testAPI) insertDelivery(hookID int64, event, status string, attempts int) uuid.UUID {
	a.t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := a.pool.Exec(context.Background(), `INSERT INTO webhook_deliveries
		(id, subscription_id, event_id, event, body, status, attempts, round_attempts)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
		id, hookID, events.NewEventID(), event, []byte(`{"event":"`+event+`"}`), status, attempts)
	if err != nil {
		a.t.Fatal(err)
	}
	return id
}

// insertAttempt writes an attempt of a delivery as the dispatcher would, and returns its id.
func (a *testAPI) insertAttempt(hookID int64, deliveryID uuid.UUID, attempt int, statusCode *int, errText *string) int64 {
	a.t.Helper()
	var id int64
	err := a.pool.QueryRow(context.Background(), `INSERT INTO webhook_attempts
		(delivery_id, subscription_id, attempt, status_code, error, duration_ms, response_excerpt)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
		deliveryID, hookID, attempt, statusCode, errText, 10*attempt, ptr("ok")).Scan(&id)
	if err != nil {
		a.t.Fatal(err)
	}
	return id
}

// outboxRows returns the outbox's rows, oldest first.
func (a *testAPI) outboxRows() []outboxRow {
	a.t.Helper()
	rows, err := a.pool.Query(context.Background(), `SELECT msg_id, subject, payload FROM outbox ORDER BY id`)
	if err != nil {
		a.t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.msgID, &r.subject, &r.payload); err != nil {
			a.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		a.t.Fatal(err)
	}
	return out
}

type outboxRow struct {
	msgID, subject string
	payload        []byte
}

func TestWebhookTest(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	adminUser, admin := a.user("admin@example.com", app.RoleAdmin)
	hook := a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/a", "events": []string{events.TypePackageExpired}})
	id := hookID(t, hook)
	// Test is sent even to an inactive subscription.
	expect(t, a.do("PATCH", hookPath(id, ""), admin, map[string]any{"active": false}), http.StatusOK)

	r := a.do("POST", hookPath(id, "/test"), admin, nil, "User-Agent", "webhook-test/1")
	expect(t, r, http.StatusAccepted)
	m := r.json(t)
	eventID, _ := m["event_id"].(string)
	if len(m) != 1 || eventID == "" {
		t.Fatalf("test answer = %s, want {\"event_id\"}", r.body)
	}
	if u, err := uuid.Parse(eventID); err != nil || u.Version() != 7 {
		t.Fatalf("event_id %q is not a UUIDv7", eventID)
	}

	rows := a.outboxRows()
	if len(rows) != 1 {
		t.Fatalf("outbox rows = %d, want 1", len(rows))
	}
	row := rows[0]
	if row.subject != "shipfile.events.webhook.test" || row.msgID != eventID {
		t.Fatalf("outbox row on %q with msg id %q, want shipfile.events.webhook.test and %q", row.subject, row.msgID, eventID)
	}
	env, err := events.UnmarshalEnvelope(row.payload)
	if err != nil {
		t.Fatal(err)
	}
	wt := env.GetWebhookTest()
	if env.GetEventId() != eventID || env.GetType() != events.TypeWebhookTest || env.GetVersion() != events.Version ||
		wt.GetHookId() != id || wt.GetMessage() != "This is a test delivery from shipfile." {
		t.Fatalf("envelope = %v", env)
	}
	if d := time.Since(env.GetOccurredAt().AsTime()); d < 0 || d > time.Minute {
		t.Fatalf("occurred_at = %v", env.GetOccurredAt().AsTime())
	}

	var actor *int64
	var action, ua string
	var pkg *uuid.UUID
	err = a.pool.QueryRow(context.Background(),
		`SELECT actor_user_id, action, package_id, user_agent FROM audit_log WHERE action = 'webhook.test'`).Scan(&actor, &action, &pkg, &ua)
	if err != nil {
		t.Fatalf("audit entry: %v", err)
	}
	if actor == nil || *actor != adminUser.ID || pkg != nil || ua != "webhook-test/1" {
		t.Fatalf("audit entry: actor %v package %v user agent %q", actor, pkg, ua)
	}
	// The audit log shows the test (beside the entries of the admin's own account).
	r = a.do("GET", "/api/v1/admin/audit", admin, nil)
	tests := 0
	for _, it := range r.json(t)["items"].([]any) {
		if it.(map[string]any)["action"] == "webhook.test" {
			tests++
		}
	}
	if tests != 1 {
		t.Fatalf("audit log = %s, want one webhook.test entry", r.body)
	}

	// Each test is an event of its own.
	r = a.do("POST", hookPath(id, "/test"), admin, nil)
	expect(t, r, http.StatusAccepted)
	if rows := a.outboxRows(); len(rows) != 2 || rows[1].msgID == eventID || rows[1].msgID != r.json(t)["event_id"] {
		t.Fatalf("second test: %d rows", len(rows))
	}
}

func TestWebhookRedeliver(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	id := hookID(t, a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/a"}))
	other := hookID(t, a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/b"}))
	failed := a.insertDelivery(id, events.TypePackageFinalized, "failed", 8)
	untouched := a.insertDelivery(id, events.TypePackageCreated, "failed", 8)
	others := a.insertDelivery(other, events.TypePackageFinalized, "failed", 8)

	r := a.do("POST", hookPath(id, "/deliveries/"+failed.String()+"/redeliver"), admin, nil)
	expect(t, r, http.StatusAccepted)
	if m := r.json(t); len(m) != 1 || m["delivery_id"] != failed.String() {
		t.Fatalf("redeliver answer = %s", r.body)
	}

	state := func(d uuid.UUID) (status string, round, attempts int) {
		t.Helper()
		if err := a.pool.QueryRow(context.Background(),
			`SELECT status, round_attempts, attempts FROM webhook_deliveries WHERE id = $1`, d).Scan(&status, &round, &attempts); err != nil {
			t.Fatal(err)
		}
		return
	}
	if s, round, total := state(failed); s != "pending" || round != 0 || total != 8 {
		t.Fatalf("redelivered: status %s, round_attempts %d, attempts %d; want pending, 0, 8", s, round, total)
	}
	if s, round, _ := state(untouched); s != "failed" || round != 8 {
		t.Fatalf("another delivery changed: %s %d", s, round)
	}

	rows := a.outboxRows()
	if len(rows) != 1 {
		t.Fatalf("outbox rows = %d, want 1", len(rows))
	}
	if want := fmt.Sprintf("shipfile.webhooks.%d", id); rows[0].subject != want {
		t.Fatalf("subject = %q, want %q", rows[0].subject, want)
	}
	if !strings.HasPrefix(rows[0].msgID, failed.String()+"/redeliver/") {
		t.Fatalf("msg id = %q, want %s/redeliver/<id>", rows[0].msgID, failed)
	}
	job, err := events.UnmarshalWebhookJob(rows[0].payload)
	if err != nil {
		t.Fatal(err)
	}
	if job.GetDeliveryId() != failed.String() || job.GetHookId() != id {
		t.Fatalf("job = %v", job)
	}

	// Another subscription's delivery is not found through this one, and nothing is written.
	expect(t, a.do("POST", hookPath(id, "/deliveries/"+others.String()+"/redeliver"), admin, nil), http.StatusNotFound)
	if s, round, _ := state(others); s != "failed" || round != 8 {
		t.Fatalf("another subscription's delivery changed: %s %d", s, round)
	}
	if n := len(a.outboxRows()); n != 1 {
		t.Fatalf("outbox rows = %d after a 404, want 1", n)
	}

	// A second redelivery is a new job (its own message id, not dropped as a duplicate).
	expect(t, a.do("POST", hookPath(id, "/deliveries/"+failed.String()+"/redeliver"), admin, nil), http.StatusAccepted)
	if rows := a.outboxRows(); len(rows) != 2 || rows[1].msgID == rows[0].msgID {
		t.Fatalf("second redelivery: %v", rows)
	}
}

func TestWebhookDeliveries(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	id := hookID(t, a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/a"}))
	other := hookID(t, a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/b"}))

	r := a.do("GET", hookPath(id, "/deliveries"), admin, nil)
	expect(t, r, http.StatusOK)
	if string(r.body) != `{"items":[],"next_cursor":null}` {
		t.Fatalf("empty log = %s", r.body)
	}

	// 3 deliveries: one that failed 8 times, one that succeeded on its second attempt,
	// one still pending after 1 attempt; 25 attempts in all, interleaved with another
	// subscription's.
	failed := a.insertDelivery(id, events.TypePackageCreated, "failed", 8)
	succeeded := a.insertDelivery(id, events.TypePackageFinalized, "succeeded", 2)
	pending := a.insertDelivery(id, events.TypePackageDownloaded, "pending", 1)
	foreign := a.insertDelivery(other, events.TypePackageCreated, "failed", 8)
	type want struct {
		id       int64
		delivery uuid.UUID
		event    string
		attempt  int
		status   string
		code     *int
		err      *string
	}
	var all []want
	add := func(d uuid.UUID, event, status string, attempt int, code *int, errText *string) {
		all = append(all, want{a.insertAttempt(id, d, attempt, code, errText), d, event, attempt, status, code, errText})
		a.insertAttempt(other, foreign, attempt, code, errText)
	}
	for i := 1; i <= 8; i++ {
		add(failed, events.TypePackageCreated, "failed", i, ptr(500), ptr("the receiver answered 500"))
	}
	add(succeeded, events.TypePackageFinalized, "succeeded", 1, nil, ptr("connection refused"))
	add(succeeded, events.TypePackageFinalized, "succeeded", 2, ptr(204), nil)
	add(pending, events.TypePackageDownloaded, "pending", 1, ptr(503), ptr("the receiver answered 503"))
	for i := 0; i < 14; i++ {
		add(failed, events.TypePackageCreated, "failed", 9+i, nil, ptr("timeout"))
	}
	slices.Reverse(all) // newest first

	var eventIDs = map[uuid.UUID]string{}
	for _, d := range []uuid.UUID{failed, succeeded, pending} {
		var e string
		if err := a.pool.QueryRow(context.Background(), `SELECT event_id FROM webhook_deliveries WHERE id = $1`, d).Scan(&e); err != nil {
			t.Fatal(err)
		}
		eventIDs[d] = e
	}

	var seen []map[string]any
	cursor, pages := "", 0
	for {
		path := hookPath(id, "/deliveries?limit=10")
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := a.do("GET", path, admin, nil)
		expect(t, r, http.StatusOK)
		page := r.json(t)
		for _, it := range page["items"].([]any) {
			seen = append(seen, it.(map[string]any))
		}
		pages++
		next, ok := page["next_cursor"].(string)
		if !ok {
			if page["next_cursor"] != nil {
				t.Fatalf("next_cursor = %v", page["next_cursor"])
			}
			break
		}
		cursor = next
	}
	if pages != 3 || len(seen) != len(all) {
		t.Fatalf("pages = %d, items = %d; want 3 pages of %d items", pages, len(seen), len(all))
	}
	fields := []string{"id", "delivery_id", "event_id", "event", "attempt", "status_code", "error", "duration_ms",
		"response_excerpt", "created_at", "delivery_status"}
	for i, got := range seen {
		w := all[i]
		if !sameKeys(got, fields) {
			t.Fatalf("item has %v, want %v", keys(got), fields)
		}
		if got["id"] != float64(w.id) || got["delivery_id"] != w.delivery.String() || got["event_id"] != eventIDs[w.delivery] ||
			got["event"] != w.event || got["attempt"] != float64(w.attempt) || got["delivery_status"] != w.status ||
			got["duration_ms"] != float64(10*w.attempt) || got["response_excerpt"] != "ok" {
			t.Fatalf("item %d = %v, want %+v", i, got, w)
		}
		if (w.code == nil) != (got["status_code"] == nil) || (w.code != nil && got["status_code"] != float64(*w.code)) {
			t.Fatalf("item %d status_code = %v, want %v", i, got["status_code"], w.code)
		}
		if (w.err == nil) != (got["error"] == nil) || (w.err != nil && got["error"] != *w.err) {
			t.Fatalf("item %d error = %v, want %v", i, got["error"], w.err)
		}
		assertUTC(t, got["created_at"])
	}

	r = a.do("GET", hookPath(id, "/deliveries"), admin, nil)
	if n := len(r.json(t)["items"].([]any)); n != 20 {
		t.Fatalf("default page = %d, want 20", n)
	}
	r = a.do("GET", hookPath(id, "/deliveries?limit=100"), admin, nil)
	if page := r.json(t); len(page["items"].([]any)) != 25 || page["next_cursor"] != nil {
		t.Fatalf("limit=100: %d items, next_cursor %v", len(page["items"].([]any)), page["next_cursor"])
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "limit=", "cursor=x", "cursor=-5", "cursor=0"} {
		expect(t, a.do("GET", hookPath(id, "/deliveries?"+q), admin, nil), http.StatusUnprocessableEntity)
	}
}
