//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/pkg/events"
)

// orderedLife is what each package of the ordered scenario goes through, one event each.
var orderedLife = []string{
	events.TypePackageCreated, events.TypePackageFileUploaded, events.TypePackageFinalized,
	events.TypePackageRevoked, events.TypePackageDeleted,
}

// TestKillDispatcherMidRetryOrdered: clients take packages through their whole life
// (created, file uploaded, finalized, revoked, deleted) while two dispatchers deliver
// the events to a subscription with ordering "package", whose receiver fails the first
// three attempts of each package's first event. While those are being retried one
// dispatcher is SIGKILLed, and started again later. At the end every event of every
// package arrived, and for each package the events were accepted in their
// X-Service-Sequence order, none before the one ahead of it was accepted.
func TestKillDispatcherMidRetryOrdered(t *testing.T) {
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	s.StartGateway("SHIPFILE_RATE_LIMIT=0")
	env := append([]string{"SHIPFILE_WEBHOOK_ACK_WAIT=4s"}, dispatcherEnv...)
	d1 := s.StartService("webhooks", env...)
	s.StartService("webhooks", env...)
	rcv := startOrderReceiver(t, 3)
	ordering := apiclient.WebhookOrderingPackage
	w := rig.Webhook(rcv.url, orderedLife...)
	w.Ordering = &ordering
	s.API.MustCreateWebhook(t, w)

	var (
		mu       sync.Mutex
		done     []string // packages whose whole life went through the API
		apiFails int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 6 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id, err := livePackage(s.API, fmt.Sprintf("ordered %d/%d", c, n))
				mu.Lock()
				if err != nil {
					apiFails++
				} else {
					done = append(done, id)
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(*load / 3)
	d1.Kill()
	record(t, "dispatcher 1 SIGKILLed after", (*load / 3).Round(100*time.Millisecond))
	time.Sleep(*load / 3)
	d1.Start()
	d1.WaitReady(60 * time.Second)
	time.Sleep(*load / 3)
	close(stop)
	wg.Wait()

	want := map[string]bool{}
	for _, id := range done {
		want[id] = true
	}
	missing := func() int {
		return rcv.missing(want, len(orderedLife))
	}
	deadline := time.Now().Add(90 * time.Second)
	for missing() > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	st := rcv.check(want, len(orderedLife))
	record(t, "packages through their whole life / lives the API failed", fmt.Sprintf("%d / %d", len(done), apiFails))
	record(t, "requests received / refused by the receiver / duplicates", fmt.Sprintf("%d / %d / %d", st.requests, st.refused, st.duplicates))
	record(t, "events lost / accepted out of order", fmt.Sprintf("%d / %d", st.lost, len(st.outOfOrder)))
	if len(done) == 0 {
		t.Fatal("no package went through its life")
	}
	if st.refused < len(done) {
		t.Errorf("the receiver refused %d attempts, want at least one per package (%d): the retries never happened", st.refused, len(done))
	}
	if st.lost > 0 {
		t.Errorf("%d events never arrived", st.lost)
	}
	if len(st.outOfOrder) > 0 {
		t.Errorf("%d events accepted before the one ahead of them, e.g. %v", len(st.outOfOrder), st.outOfOrder[:min(3, len(st.outOfOrder))])
	}
	if apiFails > 0 && apiFails*10 > len(done) {
		t.Errorf("%d package lives failed in the API against %d that went through", apiFails, len(done))
	}
}

// livePackage takes one package through its whole life and returns its id.
func livePackage(api *rig.Client, title string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := api.Do(ctx, "POST", "/api/v1/packages", rig.NewPackage(title))
	if err != nil {
		return "", err
	}
	if a.Status != http.StatusCreated {
		return "", fmt.Errorf("create: %s", a.String())
	}
	id := a.Str("id")
	a, err = api.Upload(ctx, id, "a.txt", strings.NewReader("ordered"))
	if err != nil {
		return "", err
	}
	if a.Status != http.StatusCreated {
		return "", fmt.Errorf("upload: %s", a.String())
	}
	if _, err := api.Finalize(ctx, id); err != nil {
		return "", err
	}
	if err := api.Revoke(ctx, id); err != nil {
		return "", err
	}
	if err := api.DeletePackage(ctx, id); err != nil {
		return "", err
	}
	return id, nil
}

// orderReceiver records each request of an ordered subscription by package and
// X-Service-Sequence, refusing (503) the first failFirst attempts of each package's
// first event.
type orderReceiver struct {
	url       string
	failFirst int

	mu  sync.Mutex
	got map[string][]orderHit // by package
}

type orderHit struct {
	seq      int
	delivery string
	accepted bool
	at       time.Time
}

func startOrderReceiver(t *testing.T, failFirst int) *orderReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &orderReceiver{url: "http://" + ln.Addr().String() + "/ordered", failFirst: failFirst, got: map[string][]orderHit{}}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

func (r *orderReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body struct {
		PackageID string `json:"package_id"`
	}
	raw, _ := io.ReadAll(req.Body)
	_ = json.Unmarshal(raw, &body)
	seq, err := strconv.Atoi(req.Header.Get("X-Service-Sequence"))
	pkg := body.PackageID
	if err != nil || pkg == "" {
		// Without them the delivery cannot be placed; the check counts it as lost.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	r.mu.Lock()
	tries := 0
	for _, h := range r.got[pkg] {
		if h.seq == seq {
			tries++
		}
	}
	h := orderHit{seq: seq, delivery: req.Header.Get("X-Service-Delivery"), at: time.Now(), accepted: seq != 1 || tries >= r.failFirst}
	r.got[pkg] = append(r.got[pkg], h)
	r.mu.Unlock()
	if !h.accepted {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// missing counts the events of the packages in want not yet accepted (each package has
// events 1…n).
func (r *orderReceiver) missing(want map[string]bool, n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	lost := 0
	for pkg := range want {
		ok := map[int]bool{}
		for _, h := range r.got[pkg] {
			if h.accepted {
				ok[h.seq] = true
			}
		}
		for seq := 1; seq <= n; seq++ {
			if !ok[seq] {
				lost++
			}
		}
	}
	return lost
}

type orderStats struct {
	requests, refused, duplicates, lost int
	outOfOrder                          []string
}

// check counts what arrived and finds, per package, an event whose first arrival came
// before the event ahead of it had been accepted.
func (r *orderReceiver) check(want map[string]bool, n int) orderStats {
	st := orderStats{lost: r.missing(want, n)}
	r.mu.Lock()
	defer r.mu.Unlock()
	pkgs := make([]string, 0, len(r.got))
	for pkg := range r.got {
		pkgs = append(pkgs, pkg)
	}
	sort.Strings(pkgs)
	for _, pkg := range pkgs {
		hits := r.got[pkg]
		firstAccepted, firstSeen := map[int]time.Time{}, map[int]time.Time{}
		accepted := map[int]int{}
		for _, h := range hits {
			st.requests++
			if !h.accepted {
				st.refused++
			}
			if _, ok := firstSeen[h.seq]; !ok {
				firstSeen[h.seq] = h.at
			}
			if h.accepted {
				accepted[h.seq]++
				if _, ok := firstAccepted[h.seq]; !ok {
					firstAccepted[h.seq] = h.at
				}
			}
		}
		for _, c := range accepted {
			st.duplicates += max(0, c-1)
		}
		for seq := 2; seq <= n; seq++ {
			seen, ok := firstSeen[seq]
			if !ok {
				continue
			}
			ahead, ok := firstAccepted[seq-1]
			if !ok || seen.Before(ahead) {
				st.outOfOrder = append(st.outOfOrder, fmt.Sprintf("%s: event %d before event %d was accepted", pkg, seq, seq-1))
			}
		}
	}
	return st
}
