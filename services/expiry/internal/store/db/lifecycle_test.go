package db

import (
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/lifecycle"
)

// TestQueriesUseTheLifecycleRule holds the queries that decide whether a package is
// overdue (queries.sql, compiled by sqlc) to lifecycle's SQL, word for word: the rule
// every service shares, which lifecycle's tests evaluate in PostgreSQL against the Go
// rule.
func TestQueriesUseTheLifecycleRule(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, query, rule string }{
		{"ExpireDue", expireDue, lifecycle.OverdueSQL("o", "$1")},
		{"OverdueLag", overdueLag, lifecycle.OverdueSQL("", "$1")},
	} {
		if !strings.Contains(tt.query, tt.rule) {
			t.Errorf("%s does not contain %s:\n%s", tt.name, tt.rule, tt.query)
		}
	}
}
