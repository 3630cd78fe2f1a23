package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/store"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

// TestHotPlansStayIndexLookups sets the stale-plan trap: the dispatcher's pool prepares its
// per-delivery statements while webhook_deliveries is empty and never analyzed (as on a
// fresh database, or a server with autovacuum off), runs them more than five times (when
// PostgreSQL's default plan cache would switch to a generic plan), and then the table
// grows to tens of thousands of rows. The statements must still find their rows through
// the primary key, not scan the table, on the pool every service opens
// (database.Open).
func TestHotPlansStayIndexLookups(t *testing.T) {
	t.Parallel()
	ctx, pool := onePool(t)
	st := store.New(pool, nil)
	hook := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://a.example/hook", Secret: "whsec_a"})

	// Prepared and run ten times on the empty table (the ids do not exist: the
	// upserts write their rows).
	missing := uuid.NewString()
	for i := range 10 {
		if _, err := st.Deliveries(ctx, []string{missing}); err != nil {
			t.Fatal(err)
		}
		ev := fmt.Sprintf("first-%d", i)
		if _, err := st.RecordAttempts(ctx, []app.AttemptRecord{{DeliveryID: app.DeliveryID(ev, hook), SubscriptionID: hook,
			EventID: ev, Event: "package.created", Body: []byte(`{}`), StatusCode: 200, Status: app.StatusSucceeded}}); err != nil {
			t.Fatal(err)
		}
		ev = fmt.Sprintf("disabled-%d", i)
		if err := st.MarkFailed(ctx, app.Delivery{ID: app.DeliveryID(ev, hook), SubscriptionID: hook, EventID: ev,
			Event: "package.created", Body: []byte(`{}`)}, "x"); err != nil {
			t.Fatal(err)
		}
	}

	const rows = 30000
	if _, err := pool.Exec(ctx, `INSERT INTO webhook_deliveries (id, subscription_id, event_id, event, body)
		SELECT gen_random_uuid(), $1, 'ev-' || g, 'package.created', '{}'::bytea FROM generate_series(1, $2) g`, hook, rows); err != nil {
		t.Fatal(err)
	}
	var id string
	if err := pool.QueryRow(ctx, `SELECT id::text FROM webhook_deliveries ORDER BY id LIMIT 1 OFFSET 12345`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	// And run again on the full table, as the dispatcher would.
	for range 10 {
		ds, err := st.Deliveries(ctx, []string{id})
		if err != nil || len(ds) != 1 {
			t.Fatalf("%v %v", ds, err)
		}
		if _, err := st.RecordAttempts(ctx, []app.AttemptRecord{{DeliveryID: id, SubscriptionID: hook, StatusCode: 500, Error: "boom", Status: app.StatusPending}}); err != nil {
			t.Fatal(err)
		}
	}

	// The upserts find a delivery's row through the primary key as their conflict
	// arbiter: no plan of theirs reads the table. RecordAttempts runs under its generic
	// plan (made on the empty table, kept while it grows), the others under custom plans.
	for _, tc := range []struct {
		name, marker, args, want string
		generic                  bool
	}{
		{"Deliveries", "FROM webhook_deliveries\nWHERE id = ANY", fmt.Sprintf(`('{%s}')`, id), "using webhook_deliveries_pkey", false},
		{"RecordAttempts", "INSERT INTO webhook_attempts", fmt.Sprintf(`('{%s}', '{%d}', '{ev}', '{package.created}', '{"\\x7b7d"}', '{"2026-11-26 00:00:00+00"}', '{500}', '{boom}', '{pending}', '{3}', '{""}', '{f}', '{""}', '{0}')`, id, hook),
			"Conflict Arbiter Indexes: webhook_deliveries_pkey", true},
		{"MarkFailed", "'failed', $6::text", fmt.Sprintf(`('%s', %d, 'ev', 'package.created', '{}', 'x', now(), '', 0)`, id, hook),
			"Conflict Arbiter Indexes: webhook_deliveries_pkey", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := explainPrepared(ctx, t, pool, tc.marker, tc.args, tc.generic)
			if strings.Contains(plan, "Seq Scan on webhook_deliveries") || !strings.Contains(plan, tc.want) {
				t.Fatalf("not an index lookup on webhook_deliveries (want %q):\n%s", tc.want, plan)
			}
		})
	}
}

// onePool returns a fresh database's pool as every service opens it (database.Open),
// with one connection, so that every call runs on the connection whose prepared
// statements explainPrepared explains, and a context bounding the test.
func onePool(t *testing.T) (context.Context, *pgxpool.Pool) {
	t.Helper()
	_, url := schematest.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	pool, err := database.Open(ctx, url+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return ctx, pool
}

// explainPrepared finds the statement the pool's connection prepared whose text holds
// marker, checks that it ran more than five times (under its generic plan when generic
// is set) and returns EXPLAIN of its execution with args (the plan PostgreSQL's plan
// cache gives it now; its generic plan when generic is set).
func explainPrepared(ctx context.Context, t *testing.T, pool *pgxpool.Pool, marker, args string, generic bool) string {
	t.Helper()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var name string
	var generics, custom int64
	err = conn.QueryRow(ctx, `SELECT name, generic_plans, custom_plans FROM pg_prepared_statements
		WHERE strpos(statement, $1) > 0`, marker).Scan(&name, &generics, &custom)
	if err != nil {
		t.Fatalf("prepared statement with %q: %v", marker, err)
	}
	if generics+custom <= 5 || (generic && generics <= 5) {
		t.Fatalf("%s ran %d times under its generic plan and %d under custom ones, want more than 5 (generic: %v)", name, generics, custom, generic)
	}
	if generic {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
			t.Fatal(err)
		}
		defer conn.Exec(ctx, "RESET plan_cache_mode") //nolint:errcheck // the connection goes with the pool
	}
	rows, err := conn.Query(ctx, fmt.Sprintf("EXPLAIN EXECUTE %q%s", name, args))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s(generic plans %d, custom plans %d)\n", plan.String(), generics, custom)
}

// TestHealthPassLooksUpFailuresInTheIndex: the health pass reads the window of attempts
// once, and finds each subscription's first failure after its last success through the
// index of failed attempts, not by reading the window again for each subscription
// (which made a pass with 200 subscriptions take longer than its period). Checked on
// tables never analyzed, as on a server with autovacuum off.
func TestHealthPassLooksUpFailuresInTheIndex(t *testing.T) {
	t.Parallel()
	ctx, pool := onePool(t)
	st := store.New(pool, nil)
	for i := range 50 {
		webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: fmt.Sprintf("https://%d.example/hook", i), Secret: "whsec_a"})
	}
	// 20,000 attempts over the last ten minutes, one in ten failed, and the three newest
	// of each subscription: each is failing since its last success.
	if _, err := pool.Exec(ctx, `INSERT INTO webhook_attempts (delivery_id, subscription_id, attempt, status_code, duration_ms, created_at)
		SELECT gen_random_uuid(), s.id, 1, CASE WHEN g % 10 = 0 OR g <= 3 THEN 500 ELSE 200 END, 1, now() - (g % 600) * interval '1 second'
		FROM generate_series(1, 400) g CROSS JOIN webhook_subscriptions s`); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if _, ran, err := st.Health(ctx, time.Hour, 0, "x"); err != nil || !ran {
			t.Fatalf("pass: %v %v", ran, err)
		}
	}
	var failing int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_subscriptions WHERE failing_since IS NOT NULL AND last_success_at IS NOT NULL`).Scan(&failing); err != nil || failing != 50 {
		t.Fatalf("%d subscriptions with a success and a failure after it, want 50 (%v)", failing, err)
	}
	plan := explainPrepared(ctx, t, pool, "max(created_at) FILTER", `('1 hour')`, false)
	if !strings.Contains(plan, "webhook_attempts_failed_idx") || strings.Contains(plan, "CTE Scan") || strings.Count(plan, "Seq Scan on webhook_attempts") > 1 {
		t.Fatalf("the health pass reads the window more than once, or not the failures' index:\n%s", plan)
	}
}
