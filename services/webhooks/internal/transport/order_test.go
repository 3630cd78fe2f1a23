package transport_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/store"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

// packageEvents are the events of one package, in the order they happened.
var packageEvents = []string{events.TypePackageCreated, events.TypePackageFileUploaded,
	events.TypePackageFinalized, events.TypePackageDownloaded}

// seqOf reads a request's X-Service-Sequence (0 when absent).
func seqOf(t *testing.T, r webhooktest.Request) uint64 {
	t.Helper()
	v := r.Header.Get("X-Service-Sequence")
	if v == "" {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("X-Service-Sequence %q: %v", v, err)
	}
	return n
}

// position is a delivery's package and its event's number.
type position struct {
	pkg string
	seq uint64
}

// TestOrderedDeliveryAcrossInstances: an ordered subscription served by two dispatcher
// instances, whose receiver fails the first event of each slow package three times,
// gets no later event of a package before the earlier one succeeded, while a package
// whose events succeed at once is not held up; every request (on an unordered
// subscription too) carries the event's X-Service-Sequence.
func TestOrderedDeliveryAcrossInstances(t *testing.T) {
	f := setup(t)
	fast := "fast-" + uuid.NewString()
	respond := func(nth int, r webhooktest.Request) webhooktest.Answer {
		if r.Header.Get("X-Service-Sequence") == "1" && !strings.Contains(string(r.Body), fast) && nth <= 3 {
			return webhooktest.Answer{Status: http.StatusInternalServerError}
		}
		return webhooktest.Answer{}
	}
	ordered := webhooktest.NewReceiver(t, webhooktest.NewSecret(), respond)
	plain := webhooktest.NewReceiver(t, webhooktest.NewSecret(), nil)
	hook := f.subscribe(t, ordered, func(s *webhooktest.Subscription) { s.Ordering = app.OrderingPackage })
	plainHook := f.subscribe(t, plain, nil)
	// Retries 400 ms apart: a slow package's first event succeeds after 1.2 s or more.
	cfg := webhooktest.Config{Schedule: webhooktest.Schedule(400*time.Millisecond, 7)}
	a := f.start(t, cfg)
	b := f.start(t, cfg)

	const slowPackages = 8
	pkgs := []string{fast}
	for range slowPackages {
		pkgs = append(pkgs, uuid.NewString())
	}
	pos := map[string]position{} // by the ordered subscription's delivery id
	plainPos := map[string]position{}
	// Events interleaved across packages, each package's in its order.
	for i, typ := range packageEvents {
		for _, pkg := range pkgs {
			env := webhooktest.PackageEnvelope(typ, pkg, uint64(i+1))
			pos[app.DeliveryID(env.GetEventId(), hook)] = position{pkg, uint64(i + 1)}
			plainPos[app.DeliveryID(env.GetEventId(), plainHook)] = position{pkg, uint64(i + 1)}
			f.streams.Publish(t, f.js, env)
		}
	}
	total := len(pkgs) * len(packageEvents)

	reqs := ordered.WaitFor(t, 60*time.Second, "every ordered delivery succeeded", func(reqs []webhooktest.Request) bool {
		return len(reqs) >= total+3*slowPackages
	})
	plain.WaitN(t, total, 30*time.Second)

	// Per package: the requests in the order they came, and when the first event's
	// success was answered.
	type seen struct {
		seqs        []uint64
		firstOK     time.Time
		lastArrival time.Time
	}
	per := map[string]*seen{}
	for _, r := range reqs {
		p, ok := pos[r.Delivery]
		if !ok {
			t.Fatalf("a request for an unknown delivery %s", r.Delivery)
		}
		if got := seqOf(t, r); got != p.seq {
			t.Errorf("ordered: delivery of package %s event %d has X-Service-Sequence %d", p.pkg, p.seq, got)
		}
		s := per[p.pkg]
		if s == nil {
			s = &seen{}
			per[p.pkg] = s
		}
		s.seqs = append(s.seqs, p.seq)
		s.lastArrival = r.At
	}
	for _, pkg := range pkgs {
		s := per[pkg]
		// A later event never comes before the earlier one's last (successful) attempt.
		for i := 1; i < len(s.seqs); i++ {
			if s.seqs[i] < s.seqs[i-1] {
				t.Errorf("package %s: requests in the order %v", pkg, s.seqs)
				break
			}
		}
		want := len(packageEvents)
		if pkg != fast {
			want += 3
		}
		if len(s.seqs) != want {
			t.Errorf("package %s: %d requests %v, want %d", pkg, len(s.seqs), s.seqs, want)
		}
	}
	// The fast package is not held up by the slow ones: its last event arrived before
	// any slow package's first event succeeded (its fourth attempt).
	for _, r := range reqs {
		p := pos[r.Delivery]
		if p.pkg != fast && p.seq == 1 {
			s := per[p.pkg]
			if s.firstOK.IsZero() || r.At.After(s.firstOK) {
				s.firstOK = r.At
			}
		}
	}
	for _, pkg := range pkgs[1:] {
		if !per[fast].lastArrival.Before(per[pkg].firstOK) {
			t.Errorf("the fast package's last event came at %s, after slow package %s's first event succeeded (%s)",
				per[fast].lastArrival.Format(time.StampMicro), pkg, per[pkg].firstOK.Format(time.StampMicro))
		}
	}
	// The unordered subscription gets the same numbers.
	for _, r := range plain.Requests() {
		if p := plainPos[r.Delivery]; seqOf(t, r) != p.seq || p.seq == 0 {
			t.Errorf("unordered: delivery of package %s event %d has X-Service-Sequence %q", p.pkg, p.seq, r.Header.Get("X-Service-Sequence"))
		}
	}
	webhooktest.Eventually(t, 10*time.Second, "every ordered delivery succeeded", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		for _, d := range ds {
			if d.Status != app.StatusSucceeded {
				return false
			}
		}
		return len(ds) == total
	})
	// Both instances delivered: the order was kept between them.
	for name, in := range map[string]*webhooktest.Instance{"a": a, "b": b} {
		if n := counter(t, in.Registry, "shipfile_webhook_deliveries_total", "succeeded") + counter(t, in.Registry, "shipfile_webhook_deliveries_total", "retried"); n <= 0 {
			t.Errorf("instance %s made no attempt", name)
		}
	}
}

// TestDeadDeliveryReleasesTheNext: an ordered delivery that fails for good releases
// its package's next event, and its last attempt's error in the delivery log says so.
func TestDeadDeliveryReleasesTheNext(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(_ int, r webhooktest.Request) webhooktest.Answer {
		if r.Event == events.TypePackageCreated {
			return webhooktest.Answer{Status: http.StatusInternalServerError}
		}
		return webhooktest.Answer{}
	})
	hook := f.subscribe(t, rc, func(s *webhooktest.Subscription) { s.Ordering = app.OrderingPackage })
	f.start(t, webhooktest.Config{Schedule: webhooktest.Schedule(300*time.Millisecond, 2)})

	pkg := uuid.NewString()
	created := webhooktest.PackageEnvelope(events.TypePackageCreated, pkg, 1)
	finalized := webhooktest.PackageEnvelope(events.TypePackageFinalized, pkg, 2)
	f.streams.Publish(t, f.js, created)
	f.streams.Publish(t, f.js, finalized)

	reqs := rc.WaitN(t, 4, 20*time.Second)
	for i, r := range reqs[:3] {
		if r.Event != events.TypePackageCreated {
			t.Fatalf("request %d is %s while package.created was still being retried: %v", i+1, r.Event, eventsOf(reqs))
		}
	}
	if reqs[3].Event != events.TypePackageFinalized || seqOf(t, reqs[3]) != 2 {
		t.Fatalf("after the dead delivery: %s #%d", reqs[3].Event, seqOf(t, reqs[3]))
	}
	dead := app.DeliveryID(created.GetEventId(), hook)
	webhooktest.Eventually(t, 10*time.Second, "dead delivery failed, the next succeeded", func() bool {
		ds := map[string]string{}
		for _, d := range webhooktest.Deliveries(t, f.pool, hook) {
			ds[d.ID] = d.Status
		}
		return ds[dead] == app.StatusFailed && ds[app.DeliveryID(finalized.GetEventId(), hook)] == app.StatusSucceeded
	})
	as := webhooktest.Attempts(t, f.pool, dead)
	if len(as) != 3 || as[2].Error == nil || !strings.Contains(*as[2].Error, app.ReasonOrderReleased) {
		t.Fatalf("the dead delivery's attempts do not say it released the next: %+v", as)
	}
	for _, a := range as[:2] {
		if a.Error != nil && strings.Contains(*a.Error, app.ReasonOrderReleased) {
			t.Fatalf("an attempt before the last says the next was released: %s", *a.Error)
		}
	}
}

// TestOrderedSubscriptionPassesOverWhatItDoesNotSelect: an ordered subscription that
// selects two event types gets the package's later selected event after the earlier
// one succeeded, without waiting for the event between them that it does not take.
func TestOrderedSubscriptionPassesOverWhatItDoesNotSelect(t *testing.T) {
	f := setup(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(nth int, r webhooktest.Request) webhooktest.Answer {
		if r.Event == events.TypePackageCreated && nth <= 2 {
			return webhooktest.Answer{Status: http.StatusServiceUnavailable}
		}
		return webhooktest.Answer{}
	})
	hook := f.subscribe(t, rc, func(s *webhooktest.Subscription) {
		s.Ordering = app.OrderingPackage
		s.Events = []string{events.TypePackageCreated, events.TypePackageDeleted}
	})
	f.start(t, webhooktest.Config{Schedule: webhooktest.Schedule(300*time.Millisecond, 7)})

	pkg := uuid.NewString()
	for i, typ := range []string{events.TypePackageCreated, events.TypePackageFileUploaded, events.TypePackageDeleted} {
		f.streams.Publish(t, f.js, webhooktest.PackageEnvelope(typ, pkg, uint64(i+1)))
	}
	reqs := rc.WaitN(t, 4, 20*time.Second)
	got := fmt.Sprint(eventsOf(reqs))
	want := fmt.Sprint([]string{events.TypePackageCreated, events.TypePackageCreated, events.TypePackageCreated, events.TypePackageDeleted})
	if got != want {
		t.Fatalf("requests %s, want %s", got, want)
	}
	if seqOf(t, reqs[3]) != 3 {
		t.Fatalf("package.deleted has X-Service-Sequence %d, want 3", seqOf(t, reqs[3]))
	}
	webhooktest.Eventually(t, 10*time.Second, "both deliveries succeeded", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		return len(ds) == 2 && ds[0].Status == app.StatusSucceeded && ds[1].Status == app.StatusSucceeded
	})
	if n := len(rc.Requests()); n != 4 {
		t.Fatalf("%d requests, want 4 (package.file_uploaded is not selected)", n)
	}
}

// TestOrderHoldsWhenAnInstanceStops: the instance retrying a package's first event
// stops; another instance takes over the retry, and the package's later event still
// waits for it.
func TestOrderHoldsWhenAnInstanceStops(t *testing.T) {
	f := setup(t)
	var mu sync.Mutex
	failFirst := true
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(_ int, r webhooktest.Request) webhooktest.Answer {
		mu.Lock()
		defer mu.Unlock()
		if r.Event == events.TypePackageCreated && failFirst {
			return webhooktest.Answer{Status: http.StatusInternalServerError}
		}
		return webhooktest.Answer{}
	})
	hook := f.subscribe(t, rc, func(s *webhooktest.Subscription) { s.Ordering = app.OrderingPackage })
	cfg := webhooktest.Config{Schedule: webhooktest.Schedule(300*time.Millisecond, 7)}
	a := f.start(t, cfg)

	pkg := uuid.NewString()
	envs := []*eventsv1.Envelope{
		webhooktest.PackageEnvelope(events.TypePackageCreated, pkg, 1),
		webhooktest.PackageEnvelope(events.TypePackageFinalized, pkg, 2),
		webhooktest.PackageEnvelope(events.TypePackageDownloaded, pkg, 3),
	}
	for _, env := range envs {
		f.streams.Publish(t, f.js, env)
	}
	rc.WaitN(t, 2, 20*time.Second) // package.created failed twice
	a.Stop(t)
	f.start(t, cfg)
	rc.WaitN(t, 3, 20*time.Second) // the new instance retries it
	mu.Lock()
	failFirst = false
	mu.Unlock()
	reqs := rc.WaitFor(t, 20*time.Second, "the later events", func(reqs []webhooktest.Request) bool {
		return len(reqs) > 0 && reqs[len(reqs)-1].Event == events.TypePackageDownloaded
	})
	var order []uint64
	for _, r := range reqs {
		order = append(order, seqOf(t, r))
	}
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			t.Fatalf("X-Service-Sequence of the requests in order: %v", order)
		}
	}
	webhooktest.Eventually(t, 10*time.Second, "all succeeded", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		for _, d := range ds {
			if d.Status != app.StatusSucceeded {
				return false
			}
		}
		return len(ds) == len(envs)
	})
}

// TestOrderAfterThePlaceLeft: a package whose events were all delivered loses its place
// in the order (Order.ForgetDone's statement); its next events, published later one
// first, still go at once and in their order, the earlier's retry holding the later.
func TestOrderAfterThePlaceLeft(t *testing.T) {
	f := setup(t)
	pkg := uuid.NewString()
	var mu sync.Mutex
	failed := false
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(_ int, r webhooktest.Request) webhooktest.Answer {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("X-Service-Sequence") == "4" && !failed {
			failed = true
			return webhooktest.Answer{Status: http.StatusServiceUnavailable}
		}
		return webhooktest.Answer{}
	})
	hook := f.subscribe(t, rc, func(s *webhooktest.Subscription) { s.Ordering = app.OrderingPackage })
	f.start(t, webhooktest.Config{Schedule: webhooktest.Schedule(300*time.Millisecond, 7)})
	ctx := context.Background()
	// numbered says the outbox numbered seq events of pkg (its trigger's counter; the
	// test publishes the events itself).
	numbered := func(seq int) {
		t.Helper()
		if _, err := f.pool.Exec(ctx, `INSERT INTO package_event_seqs (package_id, seq) VALUES ($1, $2)
			ON CONFLICT (package_id) DO UPDATE SET seq = excluded.seq`, pkg, seq); err != nil {
			t.Fatal(err)
		}
	}

	numbered(3)
	for i, typ := range []string{events.TypePackageCreated, events.TypePackageFinalized, events.TypePackageDownloaded} {
		f.streams.Publish(t, f.js, webhooktest.PackageEnvelope(typ, pkg, uint64(i+1)))
	}
	rc.WaitN(t, 3, 20*time.Second)
	st := store.New(f.pool, servicetest.Keyring(t))
	webhooktest.Eventually(t, 10*time.Second, "the package's place is after event 3", func() bool {
		h, err := st.Heads(ctx, []int64{hook}, []string{pkg})
		return err == nil && h[0] == 4
	})
	if _, err := f.pool.Exec(ctx, `UPDATE webhook_order_heads SET updated_at = now() - interval '2 hours' WHERE package_id = $1`, pkg); err != nil {
		t.Fatal(err)
	}
	if n, err := st.ForgetDone(ctx, time.Hour, 100); err != nil || n != 1 {
		t.Fatalf("forget: %d %v, want 1", n, err)
	}
	if h, err := st.Heads(ctx, []int64{hook}, []string{pkg}); err != nil || h[0] != 0 {
		t.Fatalf("the place after the pass: %v %v, want none", h, err)
	}

	numbered(5)
	f.streams.Publish(t, f.js, webhooktest.PackageEnvelope(events.TypePackageRevoked, pkg, 5))
	f.streams.Publish(t, f.js, webhooktest.PackageEnvelope(events.TypePackageDownloaded, pkg, 4))
	// Well within the minute after which a package whose next event never came moves on.
	reqs := rc.WaitN(t, 6, 20*time.Second)
	var order []uint64
	for _, r := range reqs {
		order = append(order, seqOf(t, r))
	}
	if got, want := fmt.Sprint(order), "[1 2 3 4 4 5]"; got != want {
		t.Fatalf("X-Service-Sequence of the requests: %s, want %s", got, want)
	}
	webhooktest.Eventually(t, 10*time.Second, "all succeeded", func() bool {
		ds := webhooktest.Deliveries(t, f.pool, hook)
		for _, d := range ds {
			if d.Status != app.StatusSucceeded {
				return false
			}
		}
		return len(ds) == 5
	})
}
