package database_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shipfile/shipfile/pkg/database"
)

func TestIsUnavailable(t *testing.T) {
	// A port nothing listens on: a real failed connection attempt.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, refused := database.Open(ctx, "postgres://postgres@"+addr+"/x?sslmode=disable")
	if refused == nil {
		t.Fatal("Open on a closed port succeeded")
	}

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"admin shutdown", fmt.Errorf("finalize: %w", &pgconn.PgError{Code: "57P01"}), true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"conn closed", fmt.Errorf("query: %w", pgconn.ErrConnClosed), true},
		{"plain error", errors.New("boom"), false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := database.IsUnavailable(tc.err); got != tc.want {
				t.Errorf("IsUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
