package pgtest_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/pkg/pgtest"
)

func TestUpSection(t *testing.T) {
	src := "-- +goose Up\nCREATE TABLE a (x int);\n-- +goose StatementBegin\nSELECT 1;\n-- +goose StatementEnd\n-- +goose Down\nDROP TABLE a;\n"
	got, err := pgtest.UpSection(src)
	if err != nil || got != "CREATE TABLE a (x int);\nSELECT 1;\n" {
		t.Fatalf("UpSection = %q, %v", got, err)
	}
	if _, err := pgtest.UpSection("CREATE TABLE a (x int);"); err == nil {
		t.Fatal("a file without an Up section must be an error")
	}
}

// TestNewGoose applies a directory of migrations found above the working directory and
// checks that the schema is there and the Down sections were not run.
func TestNewGoose(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "svc", "migrations")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"00001_a.sql": "-- +goose Up\nCREATE TABLE a (x int);\n-- +goose Down\nDROP TABLE a;\n",
		"00002_b.sql": "-- +goose Up\nINSERT INTO a VALUES (42);\n-- +goose Down\nDELETE FROM a;\n",
		// Statements no transaction block may hold: run one by one.
		"00003_c.sql": "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX CONCURRENTLY a_x ON a (x);\n" +
			"DROP INDEX CONCURRENTLY a_x;\nCREATE INDEX CONCURRENTLY a_x\n    ON a (x);\n-- +goose Down\nDROP INDEX a_x;\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := pgtest.LoadGoose(dir)
	if err != nil || len(ms) != 3 || ms[0].Name != "00001_a.sql" || ms[0].NoTx || !ms[2].NoTx {
		t.Fatalf("LoadGoose = %+v, %v", ms, err)
	}
	t.Chdir(filepath.Join(root, "svc"))
	url := pgtest.NewGoose(t, "svc/migrations")
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var x int
	if err := conn.QueryRow(context.Background(), "SELECT x FROM a").Scan(&x); err != nil || x != 42 {
		t.Fatalf("x = %d, %v", x, err)
	}
	var valid bool
	if err := conn.QueryRow(context.Background(), "SELECT indisvalid FROM pg_index WHERE indexrelid = 'a_x'::regclass").Scan(&valid); err != nil || !valid {
		t.Fatalf("index a_x valid %v, %v", valid, err)
	}
}

func TestStatements(t *testing.T) {
	got := pgtest.Statements("-- a comment;\nCREATE INDEX CONCURRENTLY i\n    ON a (x);\nDROP INDEX j;\n-- the end\n")
	want := []string{"-- a comment;\nCREATE INDEX CONCURRENTLY i\n    ON a (x);\n", "DROP INDEX j;\n", "-- the end\n"}
	if !slices.Equal(got, want) {
		t.Fatalf("Statements = %q, want %q", got, want)
	}
}
