package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
	"github.com/shipfile/shipfile/services/gateway/internal/store/auditdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// untriggered runs sql with the database's triggers off (session_replication_role
// replica), the way someone rewriting the table behind the chain's back would.
func untriggered(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAuditVerify: `shipctl audit verify` passes a whole chain, and names the entry
// edited, deleted or swapped in PostgreSQL (an error: exit 1), and passes again once
// it is restored; --from verifies from an entry on.
func TestAuditVerify(t *testing.T) {
	url := pgtest.New(t, migrations.Version(), migrations.Up)
	t.Setenv("SHIPFILE_DATABASE_URL", url)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `INSERT INTO audit_log (actor, action, detail) SELECT 'system', 'test.entry', 'entry ' || g FROM generate_series(1, 20) g`); err != nil {
		t.Fatal(err)
	}
	verify := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"audit", "verify"}, args...), strings.NewReader(""), &out)
		return out.String(), err
	}
	whole := func(stage string) {
		t.Helper()
		if out, err := verify(); err != nil || !strings.Contains(out, "20 entries verified") {
			t.Fatalf("%s: %q, %v; want the 20 entries whole", stage, out, err)
		}
	}
	whole("untouched")

	cases := []struct {
		name            string
		tamper, restore string
		want            string
	}{
		{"edited", `UPDATE audit_log SET detail = 'forged' WHERE seq = 7`, `UPDATE audit_log SET detail = 'entry 7' WHERE seq = 7`,
			"audit entry 7 changed"},
		{"deleted", `CREATE TABLE saved AS SELECT * FROM audit_log WHERE seq = 12; DELETE FROM audit_log WHERE seq = 12`,
			`INSERT INTO audit_log OVERRIDING SYSTEM VALUE SELECT * FROM saved; DROP TABLE saved`, "audit entry 12 deleted"},
		{"last deleted", `CREATE TABLE saved AS SELECT * FROM audit_log WHERE seq = 20; DELETE FROM audit_log WHERE seq = 20`,
			`INSERT INTO audit_log OVERRIDING SYSTEM VALUE SELECT * FROM saved; DROP TABLE saved`, "audit entry 20 deleted"},
		{"swapped", `UPDATE audit_log SET seq = CASE seq WHEN 3 THEN -4 ELSE -3 END WHERE seq IN (3, 4); UPDATE audit_log SET seq = -seq WHERE seq < 0`,
			`UPDATE audit_log SET seq = CASE seq WHEN 3 THEN -4 ELSE -3 END WHERE seq IN (3, 4); UPDATE audit_log SET seq = -seq WHERE seq < 0`, "audit entry 3 changed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, stmt := range strings.Split(c.tamper, "; ") {
				untriggered(t, pool, stmt)
			}
			out, err := verify()
			var b *audit.Break
			if !errors.As(err, &b) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("after the entry was %s: %q, %v; want %q", c.name, out, err, c.want)
			}
			for _, stmt := range strings.Split(c.restore, "; ") {
				untriggered(t, pool, stmt)
			}
			whole("restored")
		})
	}

	// An entry rewritten with a hash to match its new content: the next entry's
	// prev_hash names it.
	var saved string
	if err := pool.QueryRow(ctx, `SELECT hash FROM audit_log WHERE seq = 7`).Scan(&saved); err != nil {
		t.Fatal(err)
	}
	untriggered(t, pool, `UPDATE audit_log SET detail = 'forged' WHERE seq = 7`)
	untriggered(t, pool, `UPDATE audit_log a SET hash = audit_hash(a) WHERE seq = 7`)
	if _, err := verify(); err == nil || !strings.Contains(err.Error(), "audit entry 7 changed") {
		t.Fatalf("entry 7 rewritten with its hash: %v", err)
	}
	if _, err := verify("--from", "8"); err != nil {
		t.Fatalf("--from 8, past the rewritten entry: %v", err)
	}
	untriggered(t, pool, `UPDATE audit_log SET detail = 'entry 7', hash = $1 WHERE seq = 7`, saved)
	whole("entry 7 restored")

	// An export verifies offline, and fails when one line changes.
	var export bytes.Buffer
	if err := audit.NewChain(auditdb.NewStore(sqldb.NewDB(pool))).Export(ctx, time.Time{}, time.Time{}, func(e audit.Entry) error {
		export.Write(audit.AppendJSONL(nil, e))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(file, export.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := verify("--file", file); err != nil || !strings.Contains(out, "whole, 20 entries") {
		t.Fatalf("the export: %q, %v", out, err)
	}
	if err := os.WriteFile(file, bytes.Replace(export.Bytes(), []byte(`"entry 9"`), []byte(`"entry 99"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := verify("--file", file); err == nil || !strings.Contains(err.Error(), "audit entry 9 changed") {
		t.Fatalf("an export with line 9 changed: %v", err)
	}
}

// TestAuditVerifyAfterRetention: retention (audit_remove_before, which the expiry
// service runs for SHIPFILE_AUDIT_RETENTION) removes the old entries from the chain's
// front and keeps the last one's hash as the anchor: `shipctl audit verify` passes
// from the anchor, and still names an entry changed after it.
func TestAuditVerifyAfterRetention(t *testing.T) {
	url := pgtest.New(t, migrations.Version(), migrations.Up)
	t.Setenv("SHIPFILE_DATABASE_URL", url)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `INSERT INTO audit_log (actor, action, detail, created_at)
		SELECT 'system', 'test.entry', 'entry ' || g, now() - interval '400 days' + g * interval '1 minute' FROM generate_series(1, 12) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO audit_log (actor, action, detail) SELECT 'system', 'test.entry', 'young ' || g FROM generate_series(1, 8) g`); err != nil {
		t.Fatal(err)
	}
	var removed int
	if err := pool.QueryRow(ctx, `SELECT audit_remove_before(now() - interval '365 days', 1000)`).Scan(&removed); err != nil || removed != 12 {
		t.Fatalf("retention removed %d entries (%v), want the 12 old ones", removed, err)
	}
	verify := func() (string, error) {
		var out bytes.Buffer
		err := run(ctx, []string{"audit", "verify"}, strings.NewReader(""), &out)
		return out.String(), err
	}
	if out, err := verify(); err != nil || !strings.Contains(out, "8 entries verified, 13 to 20") {
		t.Fatalf("verify after retention: %q, %v; want entries 13 to 20 whole", out, err)
	}
	untriggered(t, pool, `UPDATE audit_log SET detail = 'forged' WHERE seq = 13`)
	if _, err := verify(); err == nil || !strings.Contains(err.Error(), "audit entry 13 changed") {
		t.Fatalf("verify with the first entry after the anchor changed: %v", err)
	}
	untriggered(t, pool, `UPDATE audit_log SET detail = 'young 1' WHERE seq = 13`)
	if out, err := verify(); err != nil {
		t.Fatalf("verify once restored: %q, %v", out, err)
	}
}
