package pgtest_test

import (
	"context"
	"os"
	"path/filepath"
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
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := pgtest.LoadGoose(dir)
	if err != nil || len(ms) != 2 || ms[0].Name != "00001_a.sql" {
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
}
