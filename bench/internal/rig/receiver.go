package rig

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Delivery is one webhook request a Receiver got.
type Delivery struct {
	// Hook is the request path without its slash: the receiver tells subscriptions
	// apart by the path of their URL.
	Hook string
	// Event and ID are X-Service-Event and X-Service-Delivery.
	Event, ID string
	// PackageID is the body's package_id ("" for webhook.test).
	PackageID string
	At        time.Time
	// Body is the raw body, kept only when the receiver keeps bodies.
	Body []byte
}

// Receiver is a webhook receiver on a loopback port: it answers 204 (or the status set
// for a hook) and records what it got.
type Receiver struct {
	// URL is the receiver's base URL; a subscription's URL is URL + "/" + hook name.
	URL string

	srv *http.Server

	mu     sync.Mutex
	got    []Delivery
	status map[string]int
	delay  map[string]time.Duration
	notify func(Delivery)
	bodies bool
}

// StartReceiver serves a receiver until the test ends.
func StartReceiver(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{URL: "http://" + ln.Addr().String(), status: map[string]int{}, delay: map[string]time.Duration{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	t.Cleanup(func() { _ = r.srv.Close() })
	return r
}

// OnDelivery sets a function called (on the request's goroutine) with each delivery.
func (r *Receiver) OnDelivery(f func(Delivery)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notify = f
}

// KeepBodies makes the receiver keep (or stop keeping) each request's body.
func (r *Receiver) KeepBodies(keep bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = keep
}

// SetStatus makes the receiver answer hook's requests with status (0: 204).
func (r *Receiver) SetStatus(hook string, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status[hook] = status
}

// SetDelay makes the receiver answer hook's requests only after d (0: at once); the
// request is recorded when it arrives.
func (r *Receiver) SetDelay(hook string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delay[hook] = d
}

// ServeHTTP records the request.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	d := Delivery{
		Hook:  strings.TrimPrefix(req.URL.Path, "/"),
		Event: req.Header.Get("X-Service-Event"),
		ID:    req.Header.Get("X-Service-Delivery"),
		At:    time.Now(),
	}
	var head struct {
		PackageID string `json:"package_id"`
	}
	if json.Unmarshal(body, &head) == nil {
		d.PackageID = head.PackageID
	}
	r.mu.Lock()
	if r.bodies {
		d.Body = body
	}
	r.got = append(r.got, d)
	status, notify, delay := r.status[d.Hook], r.notify, r.delay[d.Hook]
	r.mu.Unlock()
	if notify != nil {
		notify(d)
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-req.Context().Done():
		}
	}
	if status == 0 {
		status = http.StatusNoContent
	}
	w.WriteHeader(status)
}

// Deliveries returns a copy of what the receiver got so far.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.got...)
}

// Count is how many requests the receiver got.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// Reset forgets what the receiver got.
func (r *Receiver) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = nil
}

// DeliveryCount sums up deliveries: Requests received, Unique (distinct delivery
// ids), Duplicates (Requests - Unique), and Conflicts: deliveries of one (hook, event,
// package) that came with different delivery ids, which a receiver could not tell
// apart from two events (none are expected when each package has one event of a type).
type DeliveryCount struct {
	Requests, Unique, Duplicates, Conflicts int
}

// Count sums up ds.
func Count(ds []Delivery) DeliveryCount {
	ids := map[string]bool{}
	keys := map[string]string{}
	var c DeliveryCount
	for _, d := range ds {
		c.Requests++
		if !ids[d.ID] {
			ids[d.ID] = true
			c.Unique++
		}
		k := d.Hook + "|" + d.Event + "|" + d.PackageID
		if prev, ok := keys[k]; ok && prev != d.ID && d.PackageID != "" {
			c.Conflicts++
		}
		keys[k] = d.ID
	}
	c.Duplicates = c.Requests - c.Unique
	return c
}
