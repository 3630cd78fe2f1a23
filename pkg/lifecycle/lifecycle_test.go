package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/pkg/lifecycle"
	"github.com/shipfile/shipfile/pkg/pgtest"
)

var deadline = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// cases are the boundaries of the rule: before, at and after the deadline, in each kind
// of state.
var cases = []struct {
	name      string
	state     string
	now       time.Time
	overdue   bool
	effective string
}{
	{"active before the deadline", "active", deadline.Add(-time.Microsecond), false, "active"},
	{"active at the deadline", "active", deadline, true, "expired"},
	{"active after the deadline", "active", deadline.Add(time.Hour), true, "expired"},
	{"draft after the deadline", "draft", deadline.Add(time.Second), true, "expired"},
	{"revoked after the deadline", "revoked", deadline.Add(time.Second), true, "expired"},
	{"revoked before the deadline", "revoked", deadline.Add(-time.Second), false, "revoked"},
	{"expired before the deadline", "expired", deadline.Add(-time.Hour), false, "expired"},
	{"expired after the deadline", "expired", deadline.Add(time.Hour), false, "expired"},
}

// TestRules is the rule with no server.
func TestRules(t *testing.T) {
	t.Parallel()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if got := lifecycle.Overdue(tt.state, deadline, tt.now); got != tt.overdue {
				t.Errorf("Overdue = %v, want %v", got, tt.overdue)
			}
			if got := lifecycle.EffectiveState(tt.state, deadline, tt.now); got != tt.effective {
				t.Errorf("EffectiveState = %q, want %q", got, tt.effective)
			}
			if got := lifecycle.Expired(tt.state, deadline, tt.now); got != (tt.effective == lifecycle.StateExpired) {
				t.Errorf("Expired = %v", got)
			}
		})
	}
}

// TestSQLAgreesWithTheRules evaluates OverdueSQL and EffectiveStateSQL in PostgreSQL on
// every case, so the queries of the expiry service and the mailer decide as the Go rule.
func TestSQLAgreesWithTheRules(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	q := "SELECT " + lifecycle.OverdueSQL("p", "$3") + ", " + lifecycle.EffectiveStateSQL("p", "$3") +
		" FROM (SELECT $1::text AS state, $2::timestamptz AS expires_at) AS p"
	bare := "SELECT " + lifecycle.OverdueSQL("", "$3") + ", " + lifecycle.EffectiveStateSQL("", "$3") +
		" FROM (SELECT $1::text AS state, $2::timestamptz AS expires_at) AS p"
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			for _, sql := range []string{q, bare} {
				var overdue bool
				var effective string
				if err := conn.QueryRow(ctx, sql, tt.state, deadline, tt.now).Scan(&overdue, &effective); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
				if overdue != tt.overdue || effective != tt.effective {
					t.Errorf("%s: overdue %v, effective %q; want %v, %q", sql, overdue, effective, tt.overdue, tt.effective)
				}
			}
		})
	}
}
