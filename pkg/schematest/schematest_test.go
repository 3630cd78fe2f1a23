package schematest_test

import (
	"context"
	"testing"

	"github.com/shipfile/shipfile/pkg/schematest"
)

// TestPoolHasTheGatewaySchema checks that the gateway's migrations are found from pkg
// and applied: the tables every service shares exist.
func TestPoolHasTheGatewaySchema(t *testing.T) {
	pool, _ := schematest.Pool(t)
	for _, table := range []string{"packages", "outbox", "audit_log", "webhook_deliveries", "mail_deliveries"} {
		var ok bool
		if err := pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok); err != nil || !ok {
			t.Fatalf("table %s: %v %v", table, ok, err)
		}
	}
}
