package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/services/mailer/internal/app"
	"github.com/shipfile/shipfile/services/mailer/internal/mailtest"
	"github.com/shipfile/shipfile/services/mailer/internal/store"
)

func job(id string) app.Job {
	return app.Job{ID: id, Kind: app.KindOutbound, PackageID: "4b2f5c1e-8d3a-4f6b-9c2d-7e1a0b3c4d5e", RecipientEmail: "bob@example.com"}
}

type row struct {
	PackageID, Kind, Recipient, State, LastError, MessageID string
	Attempts                                                int
	SentAt                                                  *time.Time
}

func deliveryRow(t *testing.T, pool *pgxpool.Pool, id string) row {
	t.Helper()
	var r row
	err := pool.QueryRow(context.Background(), `
		SELECT package_id::text, kind, recipient_email, state, last_error, message_id, attempts, sent_at
		FROM mail_deliveries WHERE job_id = $1`, id).
		Scan(&r.PackageID, &r.Kind, &r.Recipient, &r.State, &r.LastError, &r.MessageID, &r.Attempts, &r.SentAt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type auditRow struct{ Actor, Action, PackageID, Detail string }

func audits(t *testing.T, pool *pgxpool.Pool) []auditRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT actor, action, package_id::text, detail FROM audit_log ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []auditRow
	for rows.Next() {
		var a auditRow
		if err := rows.Scan(&a.Actor, &a.Action, &a.PackageID, &a.Detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

func TestAttemptRecordsOutcomesAndAudit(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool)
	ctx := context.Background()
	const id = "0190f0c2-7a8b-7c3d-9e4f-000000000001"

	// A transient failure: attempts + 1, the error, no audit entry.
	var seen []app.Delivery
	err := st.Attempt(ctx, job(id), func(d app.Delivery) app.Outcome {
		seen = append(seen, d)
		return app.Outcome{State: app.StatePending, Attempted: true, Error: "451 try later"}
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := deliveryRow(t, pool, id); r.State != app.StatePending || r.Attempts != 1 || r.LastError != "451 try later" || r.SentAt != nil ||
		r.Kind != "outbound" || r.Recipient != "bob@example.com" || r.PackageID != job(id).PackageID {
		t.Fatalf("after a transient failure: %+v", r)
	}
	if a := audits(t, pool); len(a) != 0 {
		t.Fatalf("audit after a transient failure: %+v", a)
	}

	// Sent.
	err = st.Attempt(ctx, job(id), func(d app.Delivery) app.Outcome {
		seen = append(seen, d)
		return app.Outcome{State: app.StateSent, Attempted: true, MessageID: "<m1@example.com>", AuditAction: app.ActionSent, AuditDetail: "to bob@example.com"}
	})
	if err != nil {
		t.Fatal(err)
	}
	r := deliveryRow(t, pool, id)
	if r.State != app.StateSent || r.Attempts != 2 || r.LastError != "" || r.MessageID != "<m1@example.com>" || r.SentAt == nil {
		t.Fatalf("after sending: %+v", r)
	}
	want := []auditRow{{"system", "mail.sent", job(id).PackageID, "to bob@example.com"}}
	if a := audits(t, pool); len(a) != 1 || a[0] != want[0] {
		t.Fatalf("audit %+v, want %+v", a, want)
	}

	// A redelivery sees the sent record; writing nothing changes nothing.
	err = st.Attempt(ctx, job(id), func(d app.Delivery) app.Outcome {
		seen = append(seen, d)
		return app.Outcome{}
	})
	if err != nil {
		t.Fatal(err)
	}
	wantSeen := []app.Delivery{{State: app.StatePending}, {State: app.StatePending, Attempts: 1}, {State: app.StateSent, Attempts: 2}}
	if len(seen) != 3 || seen[0] != wantSeen[0] || seen[1] != wantSeen[1] || seen[2] != wantSeen[2] {
		t.Fatalf("fn saw %+v, want %+v", seen, wantSeen)
	}
	if r2 := deliveryRow(t, pool, id); r2.Attempts != 2 || r2.State != app.StateSent {
		t.Fatalf("a no-op attempt changed the record: %+v", r2)
	}
}

func TestAttemptIsExclusive(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool)
	ctx := context.Background()
	const id = "0190f0c2-7a8b-7c3d-9e4f-000000000002"

	inside, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- st.Attempt(ctx, job(id), func(app.Delivery) app.Outcome {
			close(inside)
			<-release
			return app.Outcome{State: app.StateSent, Attempted: true, AuditAction: app.ActionSent, AuditDetail: "to bob@example.com"}
		})
	}()
	<-inside
	start := time.Now()
	called := false
	err := st.Attempt(ctx, job(id), func(app.Delivery) app.Outcome { called = true; return app.Outcome{} })
	if !errors.Is(err, app.ErrBusy) || called {
		t.Fatalf("second Attempt while the first sends = %v (fn called %v), want ErrBusy without calling fn", err, called)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("ErrBusy took %s: the second attempt waited for the lock", d)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	var got app.Delivery
	if err := st.Attempt(ctx, job(id), func(d app.Delivery) app.Outcome { got = d; return app.Outcome{} }); err != nil {
		t.Fatal(err)
	}
	if got != (app.Delivery{State: app.StateSent, Attempts: 1}) {
		t.Fatalf("after the first attempt: %+v", got)
	}
}

// The outcome of a send that is under way when the handler's context is cancelled
// (shutdown) is still written: the e-mail is out.
func TestAttemptWritesAfterCancellation(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool)
	const id = "0190f0c2-7a8b-7c3d-9e4f-000000000003"
	ctx, cancel := context.WithCancel(context.Background())
	err := st.Attempt(ctx, job(id), func(app.Delivery) app.Outcome {
		cancel()
		return app.Outcome{State: app.StateFailed, Attempted: true, Error: "550 no such user", AuditAction: app.ActionFailed, AuditDetail: "to bob@example.com: 550 no such user"}
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := deliveryRow(t, pool, id); r.State != app.StateFailed || r.Attempts != 1 || r.LastError != "550 no such user" || r.SentAt != nil {
		t.Fatalf("record %+v", r)
	}
	if a := audits(t, pool); len(a) != 1 || a[0].Action != "mail.failed" || a[0].Detail != "to bob@example.com: 550 no such user" {
		t.Fatalf("audit %+v", a)
	}
}

// The mailer's pool is sized for its workers (its main passes PoolSize as MinConns).
func TestOpenSizesThePool(t *testing.T) {
	t.Parallel()
	url := schematest.New(t)
	pool, err := database.OpenAtLeast(context.Background(), url+"&pool_max_conns=2", 9)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if n := pool.Config().MaxConns; n != 9 {
		t.Fatalf("MaxConns = %d, want 9", n)
	}
	if _, err := database.OpenAtLeast(context.Background(), "postgres://127.0.0.1:1/x?connect_timeout=1", 1); err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
}

// The attempt sees the package's state now: expired once overdue, "" once deleted.
func TestAttemptSeesThePackageState(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool)
	ctx := context.Background()
	m := mailtest.NewJob(app.KindOutbound, "bob@example.com")
	mailtest.InsertPackage(t, pool, m, "active")
	j := app.Job{ID: m.JobId, Kind: m.Kind, PackageID: m.PackageId, RecipientEmail: m.RecipientEmail}
	var seen []string
	see := func(d app.Delivery) app.Outcome { seen = append(seen, d.PackageState); return app.Outcome{} }
	for _, change := range []string{
		``,
		`UPDATE packages SET expires_at = now() - interval '1 second' WHERE id = $1`,
		`UPDATE packages SET state = 'revoked', revoked_at = now(), expires_at = now() + interval '1 day' WHERE id = $1`,
		`DELETE FROM packages WHERE id = $1`,
	} {
		if change != "" {
			if _, err := pool.Exec(ctx, change, m.PackageId); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Attempt(ctx, j, see); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(seen, ",") != "active,expired,revoked," {
		t.Fatalf("package states seen %q, want active, expired (overdue), revoked, \"\"", seen)
	}
}
