package proto

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// schemaOwnersFile declares the one service that writes each table of the schema.
const schemaOwnersFile = "schema-owners.yaml"

// migrationsDir holds the one schema (goose migrations, owned by the gateway).
const migrationsDir = "../services/gateway/migrations"

// servicesDir holds one directory per service.
const servicesDir = "../services"

// schemaOwners is schema-owners.yaml.
type schemaOwners struct {
	Tables map[string]struct {
		Owner string `yaml:"owner"`
		Why   string `yaml:"why"`
		// Exceptions are the other services that write the table today, each with the
		// reason: documented debts, not a licence.
		Exceptions map[string]string `yaml:"exceptions"`
	} `yaml:"tables"`
}

var (
	createTable = regexp.MustCompile(`(?i)\bcreate\s+(?:unlogged\s+)?table\s+(?:if\s+not\s+exists\s+)?([a-z_][a-z0-9_]*)`)
	// writeSQL finds the table a statement writes: INSERT INTO t, UPDATE t (not FOR
	// UPDATE / DO UPDATE, whose next word is OF, SET, SKIP or NOWAIT, which are no
	// tables), DELETE FROM t.
	writeSQL = regexp.MustCompile(`(?i)\b(?:insert\s+into|update|delete\s+from)\s+([a-z_][a-z0-9_]*)`)
	// writeOutbox finds the calls of pkg/outbox that insert outbox rows.
	writeOutbox = regexp.MustCompile(`\boutbox\.(?:Insert|Queue)\(`)
)

// TestSchemaOwners fails when a table of the migrations has no declared owner (or a
// declared table no longer exists), or when a service's SQL — its .sql files and the
// string literals of its Go code, tests and test harnesses aside — writes a table it
// neither owns nor is a declared exception for; also when a declared exception no
// longer writes the table (the list stays true).
func TestSchemaOwners(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(schemaOwnersFile)
	if err != nil {
		t.Fatal(err)
	}
	var owners schemaOwners
	if err := yaml.Unmarshal(b, &owners); err != nil {
		t.Fatalf("%s: %v", schemaOwnersFile, err)
	}
	tables := schemaTables(t)
	for _, tbl := range tables {
		if _, ok := owners.Tables[tbl]; !ok {
			t.Errorf("table %s (services/gateway/migrations) has no owner in %s", tbl, schemaOwnersFile)
		}
	}
	services := serviceNames(t)
	for tbl, o := range owners.Tables {
		if !slices.Contains(tables, tbl) {
			t.Errorf("%s declares %s, which no migration creates", schemaOwnersFile, tbl)
		}
		if !slices.Contains(services, o.Owner) {
			t.Errorf("%s: owner %q of %s is not a service", schemaOwnersFile, o.Owner, tbl)
		}
	}
	for _, svc := range services {
		writes := serviceWrites(t, svc, tables)
		for tbl, where := range writes {
			o := owners.Tables[tbl]
			if o.Owner == svc {
				continue
			}
			if _, ok := o.Exceptions[svc]; !ok {
				t.Errorf("service %s writes table %s (%s), owned by %s: write it through the owner (an event, an API) or declare the exception in %s",
					svc, tbl, where, o.Owner, schemaOwnersFile)
			}
		}
		for tbl, o := range owners.Tables {
			if _, ok := o.Exceptions[svc]; ok && writes[tbl] == "" {
				t.Errorf("%s lists %s as an exception writing %s, but it writes it no more: remove the exception", schemaOwnersFile, svc, tbl)
			}
		}
	}
}

// schemaTables lists the tables the migrations create.
func schemaTables(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(migrationsDir, "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations in %s: %v", migrationsDir, err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range createTable.FindAllStringSubmatch(string(b), -1) {
			seen[strings.ToLower(m[1])] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// serviceNames lists the directories of services/.
func serviceNames(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(servicesDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// serviceWrites returns the tables svc's production code writes, each with the first
// file that does. It reads every .sql file outside migrations/ and the string literals
// of every Go file that is neither a test nor in a test harness (test/, *test/).
func serviceWrites(t *testing.T, svc string, tables []string) map[string]string {
	t.Helper()
	root := filepath.Join(servicesDir, svc)
	writes := map[string]string{}
	note := func(tbl, file string) {
		if slices.Contains(tables, tbl) && writes[tbl] == "" {
			rel, _ := filepath.Rel(servicesDir, file)
			writes[tbl] = rel
		}
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "migrations" || d.Name() == "test" || d.Name() == "testdata" || strings.HasSuffix(d.Name(), "test")) {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".sql"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range writeSQL.FindAllStringSubmatch(stripSQLComments(string(b)), -1) {
				note(strings.ToLower(m[1]), path)
			}
		case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if writeOutbox.Match(b) {
				note("outbox", path)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						s = lit.Value
					}
					for _, m := range writeSQL.FindAllStringSubmatch(stripSQLComments(s), -1) {
						note(strings.ToLower(m[1]), path)
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return writes
}

var sqlComment = regexp.MustCompile(`--[^\n]*`)

// stripSQLComments drops -- comments, whose prose may say "update packages".
func stripSQLComments(s string) string { return sqlComment.ReplaceAllString(s, "") }
