// Package api is the command line's side of the REST API: the generated client
// (pkg/apiclient) with the bearer token and a User-Agent, and the API's errors turned
// into Go errors that carry the answer's status and its `detail`.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/shipfile/shipfile/pkg/apiclient"
)

// UserAgent is sent with every request.
const UserAgent = "shipfile-cli/1"

// Client calls one shipfile server.
type Client struct {
	// Base is the server's base URL, e.g. http://127.0.0.1:8080.
	Base string
	// API is the generated client with the token; its methods that end in
	// WithResponse read whole answers, the others (API.ClientInterface) stream.
	API *apiclient.ClientWithResponses
	// Raw is the same client, for operations whose bodies are streamed.
	Raw *apiclient.Client
}

// New returns a client of base that sends token (none when empty) as its bearer.
func New(base, token string) (*Client, error) {
	base = strings.TrimRight(base, "/")
	if base == "" {
		return nil, errors.New("no server URL")
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("server URL %q must start with http:// or https://", base)
	}
	hc := &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		IdleConnTimeout:       60 * time.Second,
		MaxIdleConnsPerHost:   4,
		// Large writes: fewer system calls per byte on uploads.
		WriteBufferSize: 256 << 10,
		ReadBufferSize:  256 << 10,
	}}
	editor := func(_ context.Context, req *http.Request) error {
		req.Header.Set("User-Agent", UserAgent)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return nil
	}
	raw, err := apiclient.NewClient(base, apiclient.WithHTTPClient(hc), apiclient.WithRequestEditorFn(editor))
	if err != nil {
		return nil, err
	}
	return &Client{Base: base, API: &apiclient.ClientWithResponses{ClientInterface: raw}, Raw: raw}, nil
}

// Error is an answer of the API that is not the one asked for.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Detail is the answer's `detail`, or its status text when it had none.
	Detail string
	// RetryAfter is the answer's Retry-After, zero when none.
	RetryAfter time.Duration
	// Scan is the answer's `scan`, the malware scan state of the file it refuses, ""
	// when it has none.
	Scan string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (HTTP %d)", e.Detail, e.Status)
}

// ErrorFrom makes an *Error of an answer and its body.
func ErrorFrom(resp *http.Response, body []byte) error {
	e := &Error{Status: resp.StatusCode}
	var doc struct {
		Detail string `json:"detail"`
		Scan   string `json:"scan"`
	}
	ok := json.Unmarshal(body, &doc) == nil
	e.Scan = doc.Scan
	if ok && doc.Detail != "" {
		e.Detail = doc.Detail
	} else {
		e.Detail = strings.ToLower(http.StatusText(resp.StatusCode))
		if e.Detail == "" {
			e.Detail = "unexpected answer"
		}
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// Check returns nil when resp has status want, else the API's error. err is the
// request's own error, returned as it is.
func Check(resp *http.Response, body []byte, err error, want int) error {
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return ErrorFrom(resp, body)
	}
	return nil
}

// StatusOf returns the HTTP status of an *Error in err's chain, 0 when there is none.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Retryable says whether a failed request may succeed when made again a little
// later: the connection failed, or the server was busy, restarting or locked.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		switch e.Status {
		case http.StatusLocked, http.StatusTooManyRequests, http.StatusRequestTimeout,
			http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		case http.StatusConflict:
			// With Retry-After: a file still being checked for malware (docs/SCANNING.md,
			// block mode); other conflicts (a package's state) carry none.
			return e.RetryAfter > 0
		}
		return false
	}
	return true // a transport error: the connection dropped, the server is away
}

// Expect returns nil when the generated client's answer r (a *XxxResponse with its
// HTTPResponse and Body) has status want; else the request's error or the API's.
func Expect[R any](r *R, err error, want int) error {
	if err != nil {
		return err
	}
	if r == nil {
		return errors.New("no answer")
	}
	v := reflect.ValueOf(r).Elem()
	resp, _ := v.FieldByName("HTTPResponse").Interface().(*http.Response)
	body, _ := v.FieldByName("Body").Interface().([]byte)
	if resp == nil {
		return errors.New("no answer")
	}
	if resp.StatusCode != want {
		return ErrorFrom(resp, body)
	}
	return nil
}
