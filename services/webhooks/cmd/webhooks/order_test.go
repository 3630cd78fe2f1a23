package main

import (
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventstest"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

// TestOrderKeptWhenAnInstanceIsKilled runs two dispatcher processes for an ordered
// subscription whose receiver fails each package's first event four times, SIGKILLs one
// while those are being retried, and checks that every delivery still ends succeeded
// and that no package's later event reached the receiver before its earlier one's last
// attempt.
func TestOrderKeptWhenAnInstanceIsKilled(t *testing.T) {
	js := eventstest.Connect(t)
	streams := webhooktest.NewStreams(t, js)
	pool, dbURL := schematest.Pool(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(nth int, r webhooktest.Request) webhooktest.Answer {
		if r.Header.Get("X-Service-Sequence") == "1" && nth <= 4 {
			return webhooktest.Answer{Status: http.StatusBadGateway}
		}
		return webhooktest.Answer{Delay: 10 * time.Millisecond}
	})
	hook := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: rc.URL, Secret: rc.Secret, Ordering: app.OrderingPackage})

	opts := streams.Options
	opts.FetchWait = 500 * time.Millisecond
	env := []string{
		"SHIPFILE_DATABASE_URL=" + dbURL,
		"SHIPFILE_NATS_URL=" + eventstest.URL(),
		"SHIPFILE_WEBHOOK_ALLOW_PRIVATE=true",
		servicetest.SecretKeyEnv,
		"SHIPFILE_WEBHOOK_RETRY_SCHEDULE=400ms,400ms,400ms,400ms,400ms,400ms,400ms",
		"SHIPFILE_WEBHOOK_TIMEOUT=1s",
		"SHIPFILE_WEBHOOK_ACK_WAIT=2s", // redelivery of the killed instance's messages
		"SHIPFILE_WEBHOOK_HEALTH_INTERVAL=200ms",
		"SHIPFILE_SHUTDOWN_TIMEOUT=10s",
		"SHIPFILE_LOG_LEVEL=info",
	}
	a := startChild(t, "instance-a", opts, env)
	startChild(t, "instance-b", opts, env)

	const packages = 6
	life := []string{events.TypePackageCreated, events.TypePackageFileUploaded, events.TypePackageFinalized}
	pkgs := make([]string, packages)
	for p := range pkgs {
		pkgs[p] = uuid.NewString()
	}
	seqOf, pkgOf := map[string]uint64{}, map[string]string{} // by delivery id
	for i, typ := range life {
		for _, pkg := range pkgs {
			env := webhooktest.PackageEnvelope(typ, pkg, uint64(i+1))
			id := app.DeliveryID(env.GetEventId(), hook)
			seqOf[id], pkgOf[id] = uint64(i+1), pkg
			streams.Publish(t, js, env)
		}
	}
	// Kill one instance while the first events are being retried (two failures each).
	rc.WaitN(t, 2*packages, 30*time.Second)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()

	total := packages * len(life)
	webhooktest.Eventually(t, 90*time.Second, "every delivery succeeded", func() bool {
		ds := webhooktest.Deliveries(t, pool, hook)
		for _, d := range ds {
			if d.Status != app.StatusSucceeded {
				return false
			}
		}
		return len(ds) == total
	})
	// Per package: the numbers of the requests, in the order they came, never go down.
	last := map[string]uint64{}
	for _, r := range rc.Requests() {
		id := r.Delivery
		seq, pkg := seqOf[id], pkgOf[id]
		if seq == 0 {
			t.Fatalf("a request for an unknown delivery %s", id)
		}
		if got := r.Header.Get("X-Service-Sequence"); got != strconv.FormatUint(seq, 10) {
			t.Errorf("delivery %s: X-Service-Sequence %q, want %d", id, got, seq)
		}
		if seq < last[pkg] {
			t.Errorf("package %s: event %d came after event %d", pkg, seq, last[pkg])
		}
		last[pkg] = max(last[pkg], seq)
	}
	t.Logf("%d requests for %d deliveries", len(rc.Requests()), total)
}
