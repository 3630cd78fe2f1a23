package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// slowAnswer is how long the slow receiver of the fairness row takes to answer.
const slowAnswer = 2 * time.Second

// fairnessRow: one dispatcher delivers package.created events published at a steady
// -fair-rate to four subscriptions for two phases of -fair-duration each: first all
// four receivers answer at once, then one answers after 2 s. The figure is the p99
// latency (publish to arrival) of the three fast receivers in each phase: a slow
// receiver must not delay the others (target: within 10 % of the first phase).
func fairnessRow(ctx context.Context, t testing.TB, c config, bins rig.Bins, rep *Report) {
	rcv := rig.StartReceiver(t)
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	s.StartGateway("SHIPFILE_RATE_LIMIT=0")
	hooks := []string{"fast1", "fast2", "fast3", "slow"}
	for _, h := range hooks {
		if _, err := s.API.CreateWebhook(ctx, rig.Webhook(rcv.URL+"/"+h, events.TypePackageCreated)); err != nil {
			t.Fatal(err)
		}
	}
	s.Gateway.Stop(10 * time.Second)
	js := rig.JetStream(t, ns.URL)

	var mu sync.Mutex
	published := map[string]time.Time{} // package id → publish time
	var lat []time.Duration
	rcv.OnDelivery(func(d rig.Delivery) {
		if !strings.HasPrefix(d.Hook, "fast") {
			return
		}
		mu.Lock()
		if at, ok := published[d.PackageID]; ok {
			lat = append(lat, d.At.Sub(at))
		}
		mu.Unlock()
	})
	defer rcv.OnDelivery(nil)

	p := rig.NewService(t, bins, "webhooks", s.Env...)
	p.Start()
	p.WaitReady(60 * time.Second)
	// phase returns the fast receivers' p99, the deliveries they got and the deliveries
	// expected (3 × the events published: a paced publisher on a busy machine may send
	// one fewer than rate × duration).
	phase := func(name string) (p99 time.Duration, n, want int) {
		mu.Lock()
		lat = nil
		mu.Unlock()
		if err := publishPaced(ctx, js, c.fairRate, c.fairDuration, func(id string, at time.Time) {
			mu.Lock()
			published[id] = at
			mu.Unlock()
			want += 3
		}); err != nil {
			t.Fatalf("fairness %s: publish: %v", name, err)
		}
		time.Sleep(2 * time.Second) // the last events' deliveries
		mu.Lock()
		defer mu.Unlock()
		return rig.Percentile(lat, 99), len(lat), want
	}
	base, nBase, wantBase := phase("all fast")
	rcv.SetDelay("slow", slowAnswer)
	withSlow, nSlow, wantSlow := phase("one slow")
	p.Kill()
	rep.Rawf("dispatch fairness: %d events/s to 3 fast receivers and 1 more for %s per phase: fast p99 %s (%d of %d deliveries) with all fast, %s (%d of %d) with the fourth answering after %s",
		c.fairRate, c.fairDuration, rig.Ms(base), nBase, wantBase, rig.Ms(withSlow), nSlow, wantSlow, slowAnswer)
	fmt.Fprintf(os.Stderr, "    fairness: fast p99 %s without, %s with a slow receiver\n", rig.Ms(base), rig.Ms(withSlow))
	rep.Add(Row{
		What:     fmt.Sprintf("dispatcher fairness: p99 of 3 fast receivers, %d events/s, a 4th answering after %s", c.fairRate, slowAnswer),
		Measured: rig.Ms(withSlow),
		Baseline: rig.Ms(base) + " (the same row, all receivers fast)",
		Ratio:    ratio(float64(base), float64(withSlow)),
		Target:   "within 10 %",
		Verdict:  verdict(nSlow >= wantSlow && float64(withSlow) <= 1.1*float64(base), "%.0f%% slower", (float64(withSlow)/float64(base)-1)*100),
	})
}

// publishPaced publishes package.created events at rate per second for d, calling
// sent with each package id and the time it was published.
func publishPaced(ctx context.Context, js jetstream.JetStream, rate int, d time.Duration, sent func(id string, at time.Time)) error {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		id := uuid.NewString()
		env := events.NewEnvelope(events.TypePackageCreated, time.Now())
		env.Data = &eventsv1.Envelope_PackageCreated{PackageCreated: &eventsv1.PackageCreated{
			Package: &eventsv1.Package{PackageId: id, Title: "fair", RecipientEmail: "recipient@example.com", OwnerUserId: 1, Direction: "outbound"},
			TtlDays: 7, ExpiresAt: timestamppb.New(time.Now().Add(7 * 24 * time.Hour)),
		}}
		data, err := events.MarshalEnvelope(env)
		if err != nil {
			return err
		}
		sent(id, time.Now())
		if _, err := js.PublishAsync(events.Subject(events.TypePackageCreated), data, jetstream.WithMsgID(env.GetEventId())); err != nil {
			return err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
