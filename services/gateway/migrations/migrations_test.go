package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// TestOutOfOrder: a database that applied a later migration before an earlier one
// landed (branches get their numbers up front) takes the earlier one at the next start.
func TestOutOfOrder(t *testing.T) {
	url := pgtest.New(t, migrations.Version(), migrations.Up)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP TABLE link_rate; DELETE FROM goose_db_version WHERE version_id = 9`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatalf("Up with 00009 missing below applied ones: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM link_rate`).Scan(&n); err != nil {
		t.Fatalf("00009 was not applied: %v", err)
	}
}
