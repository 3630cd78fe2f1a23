// Package webhooktest helps the dispatcher's tests: a webhook receiver that checks
// signatures the way a subscriber would, streams of a test's own, a running dispatcher
// wired like the binary, and queries of the delivery log.
package webhooktest

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/webhooks/internal/signing"
)

// NewSecret returns a subscription secret as the gateway makes them: whsec_ + base64
// of 32 random bytes.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return signing.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// Request is one request a Receiver got, with the outcome of its signature checks.
type Request struct {
	At        time.Time
	Header    http.Header
	Body      []byte
	Event     string
	Delivery  string // X-Service-Delivery
	HookID    int64
	Timestamp int64 // webhook-timestamp
	// ServiceSignatureOK: X-Service-Signature verifies under the receiver's secret.
	ServiceSignatureOK bool
	// StandardSignatureOK: webhook-signature has a v1 signature that verifies under the
	// receiver's secret (and webhook-id equals X-Service-Delivery).
	StandardSignatureOK bool
}

// Answer is how a Receiver answers one request.
type Answer struct {
	Status int         // default 200
	Header http.Header // extra response headers
	Body   string
	// Delay holds the answer back this long (or until the client gives up).
	Delay time.Duration
}

// Respond chooses the answer to a request; nth counts the requests of its delivery
// (1 for the first).
type Respond func(nth int, r Request) Answer

// Receiver is a webhook receiver on an httptest server.
type Receiver struct {
	URL    string
	Secret string

	respond Respond
	mu      sync.Mutex
	reqs    []Request
	perDel  map[string]int
	flight  int
	maxFly  int
	changed chan struct{}
}

// NewReceiver starts a receiver verifying signatures with secret and answering with
// respond (nil: always 200). It stops when the test ends.
func NewReceiver(t testing.TB, secret string, respond Respond) *Receiver {
	t.Helper()
	if respond == nil {
		respond = func(int, Request) Answer { return Answer{} }
	}
	rc := &Receiver{Secret: secret, respond: respond, perDel: map[string]int{}, changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(srv.Close)
	rc.URL = srv.URL + "/hook"
	return rc
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{
		At:       time.Now(),
		Header:   r.Header.Clone(),
		Body:     body,
		Event:    r.Header.Get("X-Service-Event"),
		Delivery: r.Header.Get("X-Service-Delivery"),
	}
	req.HookID, _ = strconv.ParseInt(r.Header.Get("X-Service-Hook-Id"), 10, 64)
	req.Timestamp, _ = strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	req.ServiceSignatureOK = r.Method == http.MethodPost && signing.VerifyService(rc.Secret, body, r.Header.Get("X-Service-Signature"))
	req.StandardSignatureOK = r.Header.Get("webhook-id") == req.Delivery &&
		signing.VerifyStandard(rc.Secret, r.Header.Get("webhook-id"), req.Timestamp, body, r.Header.Get("webhook-signature"))

	rc.mu.Lock()
	rc.perDel[req.Delivery]++
	nth := rc.perDel[req.Delivery]
	rc.reqs = append(rc.reqs, req)
	rc.flight++
	rc.maxFly = max(rc.maxFly, rc.flight)
	rc.notifyLocked()
	rc.mu.Unlock()
	defer func() {
		rc.mu.Lock()
		rc.flight--
		rc.mu.Unlock()
	}()

	a := rc.respond(nth, req)
	if a.Delay > 0 {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(a.Delay):
		}
	}
	for k, vs := range a.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if a.Status == 0 {
		a.Status = http.StatusOK
	}
	w.WriteHeader(a.Status)
	_, _ = io.WriteString(w, a.Body)
}

func (rc *Receiver) notifyLocked() {
	close(rc.changed)
	rc.changed = make(chan struct{})
}

// Requests returns the requests received so far.
func (rc *Receiver) Requests() []Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Request(nil), rc.reqs...)
}

// MaxInFlight is the most requests the receiver was handling at once.
func (rc *Receiver) MaxInFlight() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.maxFly
}

// WaitFor waits until cond holds for the requests received, failing the test after timeout.
func (rc *Receiver) WaitFor(t testing.TB, timeout time.Duration, what string, cond func([]Request) bool) []Request {
	t.Helper()
	deadline := time.After(timeout)
	for {
		rc.mu.Lock()
		reqs := append([]Request(nil), rc.reqs...)
		changed := rc.changed
		rc.mu.Unlock()
		if cond(reqs) {
			return reqs
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("receiver: %s: not within %s (%d requests received)", what, timeout, len(reqs))
		}
	}
}

// WaitN waits until the receiver has received n requests.
func (rc *Receiver) WaitN(t testing.TB, n int, timeout time.Duration) []Request {
	t.Helper()
	return rc.WaitFor(t, timeout, strconv.Itoa(n)+" requests", func(r []Request) bool { return len(r) >= n })
}
