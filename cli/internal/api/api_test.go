package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestErrorFrom(t *testing.T) {
	t.Parallel()
	resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"7"}}}
	err := ErrorFrom(resp, []byte(`{"detail":"too many requests for this token"}`))
	var e *Error
	if !errors.As(err, &e) || e.Detail != "too many requests for this token" || e.RetryAfter != 7*time.Second {
		t.Fatalf("ErrorFrom = %#v", err)
	}
	if err.Error() != "too many requests for this token (HTTP 429)" {
		t.Fatalf("message %q", err.Error())
	}
	// No JSON body (a HEAD answer, a proxy's page): the status text.
	err = ErrorFrom(&http.Response{StatusCode: 404, Header: http.Header{}}, []byte("<html>"))
	if err.Error() != "not found (HTTP 404)" || StatusOf(fmt.Errorf("x: %w", err)) != 404 {
		t.Fatalf("ErrorFrom without detail = %v", err)
	}
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]bool{
		&Error{Status: 503}: true,
		&Error{Status: 423}: true,
		&Error{Status: 429}: true,
		&Error{Status: 401}: false,
		&Error{Status: 409}: false,
		&Error{Status: 409, RetryAfter: 5 * time.Second}: true, // a file being checked for malware
		&Error{Status: 410}:                       false,
		errors.New("connection reset"):            true,
		context.Canceled:                          false,
		fmt.Errorf("patch: %w", context.Canceled): false,
	} {
		if got := Retryable(err); got != want {
			t.Errorf("Retryable(%v) = %v, want %v", err, got, want)
		}
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for base, ok := range map[string]bool{"http://h:8080/": true, "https://files.example.com": true, "files.example.com": false, "": false} {
		c, err := New(base, "sf_x")
		if (err == nil) != ok {
			t.Errorf("New(%q) = %v", base, err)
		}
		if ok && c.Base[len(c.Base)-1] == '/' {
			t.Errorf("New(%q).Base = %q keeps the slash", base, c.Base)
		}
	}
}
