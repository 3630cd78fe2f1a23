package database_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/pgtest"
)

// TestUUIDParameters: uuid.UUID parameters (plain, through a pointer, nil, in a slice,
// compared as text) reach PostgreSQL as the same uuid values as before the codec.
func TestUUIDParameters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := database.Open(ctx, pgtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	id := uuid.MustParse("0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")
	other := uuid.MustParse("ffffffff-0000-4000-8000-000000000001")

	var got string
	if err := pool.QueryRow(ctx, `SELECT $1::uuid::text`, id).Scan(&got); err != nil || got != id.String() {
		t.Fatalf("uuid.UUID: %q, %v; want %s", got, err, id)
	}
	if err := pool.QueryRow(ctx, `SELECT $1::uuid::text`, &id).Scan(&got); err != nil || got != id.String() {
		t.Fatalf("*uuid.UUID: %q, %v; want %s", got, err, id)
	}
	var isNull bool
	if err := pool.QueryRow(ctx, `SELECT $1::uuid IS NULL`, (*uuid.UUID)(nil)).Scan(&isNull); err != nil || !isNull {
		t.Fatalf("nil *uuid.UUID: null %v, %v; want NULL", isNull, err)
	}
	if err := pool.QueryRow(ctx, `SELECT array_to_string($1::uuid[], ',')`, []uuid.UUID{id, other}).Scan(&got); err != nil || got != id.String()+","+other.String() {
		t.Fatalf("[]uuid.UUID: %q, %v", got, err)
	}
	// Text format (an untyped parameter compared as text).
	if err := pool.QueryRow(ctx, `SELECT $1::text`, id).Scan(&got); err != nil || got != id.String() {
		t.Fatalf("uuid.UUID as text: %q, %v; want %s", got, err, id)
	}
	// Read back into uuid.UUID as before (sql.Scanner), and pgtype's own UUID still encodes.
	var back uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT $1::uuid`, id).Scan(&back); err != nil || back != id {
		t.Fatalf("round trip: %s, %v; want %s", back, err, id)
	}
}
