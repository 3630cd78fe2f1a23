package store_test

import (
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/services/expiry/internal/expirytest"
	"github.com/shipfile/shipfile/services/expiry/internal/store"
)

// TestExpiryFreesUsage: expiring packages frees their owner's bytes and active
// packages at once, in the expiry's transaction (the running usage of
// docs/POLICIES.md, kept by the gateway schema's triggers).
func TestExpiryFreesUsage(t *testing.T) {
	pool, _ := schematest.Pool(t)
	st := store.New(pool)
	owner := expirytest.User(t, pool)
	expirytest.Insert(t, pool, owner,
		expirytest.Spec{State: "draft", ExpiresIn: -time.Hour, Files: 2},
		expirytest.Spec{State: "active", ExpiresIn: -time.Minute, Files: 1},
		expirytest.Spec{State: "active", ExpiresIn: time.Hour, Files: 3}, // not due
	)
	usage := func() (used int64, active int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT used_bytes, active_packages FROM user_usage WHERE user_id = $1`, owner).Scan(&used, &active); err != nil {
			t.Fatal(err)
		}
		return used, active
	}
	if used, active := usage(); used != 30 || active != 3 {
		t.Fatalf("before: used %d, active %d; want 30, 3", used, active)
	}
	if got, err := st.ExpireDue(ctx, time.Now(), 10, effects); err != nil || len(got) != 2 {
		t.Fatalf("ExpireDue: %d, %v; want 2", len(got), err)
	}
	if used, active := usage(); used != 15 || active != 1 {
		t.Fatalf("after expiry: used %d, active %d; want 15, 1", used, active)
	}
}
