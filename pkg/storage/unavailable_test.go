package storage_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/shipfile/shipfile/pkg/storage"
)

func TestIsUnavailable(t *testing.T) {
	// A real request to a port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	client, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4("k", "s", ""), MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, refused := client.BucketExists(ctx, "bucket")
	if refused == nil {
		t.Fatal("BucketExists on a closed port succeeded")
	}

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"slow down", fmt.Errorf("put: %w", minio.ErrorResponse{Code: "SlowDown", StatusCode: http.StatusServiceUnavailable}), true},
		{"no such key", minio.ErrorResponse{Code: "NoSuchKey", StatusCode: http.StatusNotFound}, false},
		{"plain error", errors.New("boom"), false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := storage.IsUnavailable(tc.err); got != tc.want {
				t.Errorf("IsUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
