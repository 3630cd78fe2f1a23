package storage

import (
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/minio/minio-go/v7"
)

// IsUnavailable reports whether err says that the object store cannot be reached right
// now: a connection refused, reset or broken mid-transfer, or an S3 answer of 503
// (slow down, server not initialised). Callers answer such errors with 503 and a retry,
// not 500.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		return resp.StatusCode == http.StatusServiceUnavailable || resp.Code == "XMinioServerNotInitialized" || resp.Code == "SlowDown"
	}
	return false
}
