//go:build faults

package faults

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/events"
)

// dispatcherEnv makes delivery retries quick, so a scenario ends soon after its fault.
var dispatcherEnv = []string{
	"SHIPFILE_WEBHOOK_RETRY_SCHEDULE=200ms,500ms,1s,1s,1s,1s,1s",
	"SHIPFILE_WEBHOOK_TIMEOUT=2s",
}

// TestKillDispatcherAndRestartNATS: clients create packages while two dispatchers
// deliver their package.created events to three subscriptions; mid-burst one dispatcher
// is SIGKILLed (and started again), then the NATS server is stopped and started again.
// At the end every (event, subscription) delivery arrived at least once, and every
// duplicate carries the X-Service-Delivery of the first.
func TestKillDispatcherAndRestartNATS(t *testing.T) {
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	s.StartGateway("SHIPFILE_RATE_LIMIT=0")
	d1 := s.StartService("webhooks", dispatcherEnv...)
	s.StartService("webhooks", dispatcherEnv...)
	rcv := rig.StartReceiver(t)
	hooks := subscribe(t, s, rcv, 3)

	l := startCreating(s.API, 6, 20*time.Millisecond)
	time.Sleep(*load / 4)
	d1.Kill()
	record(t, "dispatcher 1 SIGKILLed after", (*load / 4).Round(100*time.Millisecond))
	time.Sleep(*load / 4)
	d1.Start()
	d1.WaitReady(60 * time.Second)
	ns.Stop()
	time.Sleep(2 * time.Second)
	ns.Start()
	record(t, "NATS stopped for (s), after (s)", fmt.Sprintf("2, %.0f", (*load/2).Seconds()))
	time.Sleep(*load / 2)
	l.stop()

	db := rig.DB(t, s.DBURL)
	checkDeliveries(t, db, rcv, hooks, l, 90*time.Second)
}

// subscribe creates n subscriptions to package.created at the receiver (paths h1…hn).
func subscribe(t *testing.T, s *rig.Stack, rcv *rig.Receiver, n int) []string {
	t.Helper()
	var hooks []string
	for i := range n {
		h := fmt.Sprintf("h%d", i+1)
		s.API.MustCreateWebhook(t, rig.Webhook(rcv.URL+"/"+h, events.TypePackageCreated))
		hooks = append(hooks, h)
	}
	return hooks
}

// creator is a load of clients creating packages without pause.
type creator struct {
	stopc            chan struct{}
	wg               sync.WaitGroup
	ok, failed, five atomic.Int64
	mu               sync.Mutex
	fiveXX           []string
	maxLatency       atomic.Int64
}

// startCreating starts clients that create packages until stop, each pausing between
// two requests.
func startCreating(api *rig.Client, clients int, pause time.Duration) *creator {
	l := &creator{stopc: make(chan struct{})}
	for i := range clients {
		l.wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-l.stopc:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				t0 := time.Now()
				a, err := api.Do(ctx, "POST", "/api/v1/packages", rig.NewPackage(fmt.Sprintf("client %d package %d", i, n)))
				cancel()
				if d := int64(time.Since(t0)); d > l.maxLatency.Load() {
					l.maxLatency.Store(d)
				}
				switch {
				case err != nil:
					l.failed.Add(1)
					time.Sleep(50 * time.Millisecond)
				case a.Status >= 500:
					l.five.Add(1)
					l.mu.Lock()
					if len(l.fiveXX) < 5 {
						l.fiveXX = append(l.fiveXX, a.String())
					}
					l.mu.Unlock()
					time.Sleep(50 * time.Millisecond)
				case a.Status == http.StatusCreated:
					l.ok.Add(1)
					time.Sleep(pause)
				default:
					l.failed.Add(1)
				}
			}
		})
	}
	return l
}

func (l *creator) stop() {
	close(l.stopc)
	l.wg.Wait()
}

// checkDeliveries waits until every package in the database has reached every hook,
// then records and checks the figures: nothing lost, duplicates with one delivery id.
func checkDeliveries(t *testing.T, db *pgxpool.Pool, rcv *rig.Receiver, hooks []string, l *creator, within time.Duration) {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT id::text FROM packages`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := len(ids) * len(hooks)
	missing := func() int {
		got := map[string]bool{}
		for _, d := range rcv.Deliveries() {
			got[d.Hook+"|"+d.PackageID] = true
		}
		n := 0
		for _, id := range ids {
			for _, h := range hooks {
				if !got[h+"|"+id] {
					n++
				}
			}
		}
		return n
	}
	deadline := time.Now().Add(within)
	for missing() > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	c := rig.Count(rcv.Deliveries())
	lost := missing()
	record(t, "API: packages created (201) / requests without an answer / 5xx", triple(l.ok.Load(), l.failed.Load(), l.five.Load()))
	record(t, "events (packages committed) × subscriptions = deliveries expected", fmt.Sprintf("%d × %d = %d", len(ids), len(hooks), want))
	record(t, "requests received / distinct deliveries / duplicates / lost", fmt.Sprintf("%d / %d / %d / %d", c.Requests, c.Unique, c.Duplicates, lost))
	record(t, "duplicates with another X-Service-Delivery", c.Conflicts)
	if lost > 0 {
		t.Errorf("%d of %d deliveries never arrived", lost, want)
	}
	if c.Conflicts > 0 {
		t.Errorf("%d deliveries of one event to one hook came with different X-Service-Delivery ids", c.Conflicts)
	}
	if c.Unique != want {
		t.Errorf("%d distinct delivery ids, want %d (one per event and subscription)", c.Unique, want)
	}
	if l.five.Load() > 0 {
		t.Errorf("%d API requests answered 5xx, e.g. %v", l.five.Load(), l.fiveXX)
	}
}
