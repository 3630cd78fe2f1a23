package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/pkg/events"
)

// eventsRow: finalize → package.finalized webhook received, at a steady -event-rate
// finalizes per second (open loop: one is started every 1/rate whatever the others do)
// for -event-duration, through the gateway, its outbox relay, NATS, one dispatcher and
// a local receiver. Latency is measured from the moment the finalize request is sent,
// so it includes the API call; from its answer (the commit) is reported too.
func eventsRow(ctx context.Context, t testing.TB, c config, bins rig.Bins, rep *Report) {
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	s.StartGateway("SHIPFILE_RATE_LIMIT=0")
	dispatcher := s.StartService("webhooks")
	rcv := rig.StartReceiver(t)
	n := int(float64(c.eventRate) * c.eventDuration.Seconds())

	// Inbound drafts can be finalized without files; they are created before the
	// subscription, so their package.created events go nowhere.
	ids, err := createPackages(ctx, s.API, n, "inbound", 16)
	if err != nil {
		t.Fatalf("create %d packages: %v", n, err)
	}
	if _, err := s.API.CreateWebhook(ctx, rig.Webhook(rcv.URL+"/finalized", events.TypePackageFinalized)); err != nil {
		t.Fatal(err)
	}
	js := jetStream(t, ns.URL)
	waitConsumerIdle(ctx, t, js, events.StreamEvents, "webhooks-fanout")

	var mu sync.Mutex
	sent := make(map[string]time.Time, n)
	answered := make(map[string]time.Time, n)
	arrived := make(map[string]time.Time, n)
	rcv.OnDelivery(func(d rig.Delivery) {
		if d.Event != events.TypePackageFinalized {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, dup := arrived[d.PackageID]; !dup {
			arrived[d.PackageID] = d.At
		}
	})

	var failed atomic.Int64
	var wg sync.WaitGroup
	prof.record(ctx, s.Gateway, c.eventDuration, "events-gateway")
	prof.record(ctx, dispatcher, c.eventDuration, "events-dispatcher")
	tick := time.NewTicker(time.Second / time.Duration(c.eventRate))
	start := time.Now()
	for _, id := range ids {
		<-tick.C
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			t0 := time.Now()
			// Raw, not the generated client: this is the measured request.
			a, err := s.API.Do(ctx, "POST", "/api/v1/packages/"+id+"/finalize", nil)
			t1 := time.Now()
			if err != nil || a.Status != http.StatusOK {
				failed.Add(1)
				return
			}
			mu.Lock()
			sent[id], answered[id] = t0, t1
			mu.Unlock()
		})
	}
	tick.Stop()
	wg.Wait()
	offered := time.Since(start)
	mu.Lock()
	ok := len(sent)
	mu.Unlock()
	// The last webhooks get a few seconds to arrive.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		mu.Lock()
		got := len(arrived)
		mu.Unlock()
		if got >= ok {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	var fromSend, fromAnswer []time.Duration
	lost := 0
	for id, t0 := range sent {
		at, ok := arrived[id]
		if !ok {
			lost++
			continue
		}
		fromSend = append(fromSend, at.Sub(t0))
		fromAnswer = append(fromAnswer, at.Sub(answered[id]))
	}
	mu.Unlock()
	if len(fromSend) == 0 {
		t.Fatalf("no webhook arrived (%d finalizes answered 200, %d failed)", ok, failed.Load())
	}
	p50, p99 := rig.Percentile(fromSend, 50), rig.Percentile(fromSend, 99)
	a50, a99 := rig.Percentile(fromAnswer, 50), rig.Percentile(fromAnswer, 99)
	rep.Rawf("events: %d finalizes sent in %s (%.0f/s offered), %d answered 200, %d failed; %d webhooks arrived, %d missing after 15 s",
		len(ids), offered.Round(time.Millisecond), float64(len(ids))/offered.Seconds(), ok, failed.Load(), len(fromSend), lost)
	rep.Rawf("events: latency from the finalize request: p50 %s, p99 %s, max %s; from its answer: p50 %s, p99 %s",
		rig.Ms(p50), rig.Ms(p99), rig.Ms(rig.Percentile(fromSend, 100)), rig.Ms(a50), rig.Ms(a99))
	rep.Add(Row{
		What:     fmt.Sprintf("event latency: finalize → package.finalized webhook, %d/s for %s", c.eventRate, c.eventDuration),
		Measured: fmt.Sprintf("p50 %s, p99 %s (from the answer: p50 %s, p99 %s)", rig.Ms(p50), rig.Ms(p99), rig.Ms(a50), rig.Ms(a99)),
		Target:   "p99 ≤ 100 ms, none lost",
		Verdict: verdict(p99 <= 100*time.Millisecond && lost == 0 && failed.Load() == 0,
			"p99 %s over 100 ms, %d lost, %d finalizes failed", rig.Ms(max(0, p99-100*time.Millisecond)), lost, failed.Load()),
	})
}

// createPackages creates n packages of direction with workers concurrent clients and
// returns their ids.
func createPackages(ctx context.Context, api *rig.Client, n int, direction string, workers int) ([]string, error) {
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				body := rig.PackageBody(fmt.Sprintf("bench %d", i))
				dir := apiclient.CreatePackageDirection(direction)
				body.Direction = &dir
				p, err := api.CreatePackage(ctx, body)
				if err != nil {
					errs <- err
					return
				}
				ids[i] = p.Id.String()
			}
		})
	}
	wg.Wait()
	close(errs)
	return ids, <-errs
}

// jetStream connects to the NATS at url for the rest of the test.
func jetStream(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// waitConsumerIdle waits until the durable consumer exists and has nothing pending
// or unacknowledged.
func waitConsumerIdle(ctx context.Context, t testing.TB, js jetstream.JetStream, stream, consumer string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cons, err := js.Consumer(ctx, stream, consumer)
		if err == nil {
			info, err := cons.Info(ctx)
			if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
				return
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("consumer %s of %s not idle after 60 s", consumer, stream)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
