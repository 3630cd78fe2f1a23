package database_test

import (
	"testing"

	"github.com/shipfile/shipfile/pkg/database"
)

func TestParseConfigPlanCacheMode(t *testing.T) {
	for _, tc := range []struct{ name, url, want string }{
		{"default", "postgres://postgres@127.0.0.1:5432/x?sslmode=disable", database.PlanCacheMode},
		{"the URL's own", "postgres://postgres@127.0.0.1:5432/x?sslmode=disable&plan_cache_mode=auto", "auto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := database.ParseConfig(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; got != tc.want {
				t.Fatalf("plan_cache_mode %q, want %q", got, tc.want)
			}
		})
	}
}
