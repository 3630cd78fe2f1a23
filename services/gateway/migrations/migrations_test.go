package migrations_test

import (
	"context"
	"strings"
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

// TestUpTakesThePoolURL: the database URL the services' pools read may carry pgxpool's
// own settings (pool_max_conns=…); applying the migrations with it works, as PostgreSQL
// never sees them.
func TestUpTakesThePoolURL(t *testing.T) {
	url := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	if err := migrations.Up(context.Background(), url+sep+"pool_max_conns=3&pool_min_conns=1"); err != nil {
		t.Fatalf("Up with pool settings in the URL: %v", err)
	}
}
