package schematest_test

import (
	"testing"

	"github.com/shipfile/shipfile/services/mailer/internal/schematest"
)

func TestUpSection(t *testing.T) {
	src := "-- +goose Up\nCREATE TABLE a (x int);\n-- +goose StatementBegin\nSELECT 1;\n-- +goose StatementEnd\n-- +goose Down\nDROP TABLE a;\n"
	got, err := schematest.UpSection(src)
	if err != nil || got != "CREATE TABLE a (x int);\nSELECT 1;\n" {
		t.Fatalf("UpSection = %q, %v", got, err)
	}
	if _, err := schematest.UpSection("CREATE TABLE a (x int);"); err == nil {
		t.Fatal("a file without an Up section must be an error")
	}
}

func TestLoadFindsTheGatewayMigrations(t *testing.T) {
	ms, err := schematest.Load()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range ms {
		if m.Name == "00005_mail.sql" {
			found = true
		}
	}
	if !found {
		t.Fatalf("00005_mail.sql not among %d migrations", len(ms))
	}
	if v := schematest.Version(ms); len(v) != len("mailer_")+16 {
		t.Fatalf("version %q", v)
	}
}
