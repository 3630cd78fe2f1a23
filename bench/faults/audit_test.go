//go:build faults

package faults

import (
	"context"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
)

// TestKillGatewaysBetweenChainWrites: two gateways on one database create and delete
// packages without pause (each an audited write: the package, its chain entry and its
// events in one transaction) while one gateway or the other is SIGKILLed, mid-round
// or between rounds, and restarted, again and again. At the end `shipctl audit verify`
// passes: the transactions the kills cut off left no gap in the chain and the two
// instances no fork (two entries on one prev_hash); every package the database holds
// has its package.create entry in the chain, and every 201 and 204 the clients got
// has its entry.
func TestKillGatewaysBetweenChainWrites(t *testing.T) {
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	gateways := []*rig.Proc{s.StartGateway("SHIPFILE_RATE_LIMIT=0"), s.StartGateway("SHIPFILE_RATE_LIMIT=0")}
	db := rig.DB(t, s.DBURL)
	ctx := context.Background()
	var rollbacks0 int64
	if err := db.QueryRow(ctx, `SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&rollbacks0); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var created, deleted, cutOff, fivexx atomic.Int64
	for i := range 8 {
		api := rig.NewClient("http://"+gateways[i%2].Addr, s.Token)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, err := api.Do(ctx, "POST", "/api/v1/packages", rig.NewPackage("audited "+itoa(i)))
				switch {
				case err != nil:
					cutOff.Add(1) // the gateway is down or was killed mid-request
					time.Sleep(50 * time.Millisecond)
					continue
				case a.Status >= 500:
					fivexx.Add(1)
					continue
				case a.Status != http.StatusCreated:
					continue
				}
				created.Add(1)
				a, err = api.Do(ctx, "DELETE", "/api/v1/packages/"+a.Str("id"), nil)
				switch {
				case err != nil:
					cutOff.Add(1)
				case a.Status >= 500:
					fivexx.Add(1)
				case a.Status == http.StatusNoContent:
					deleted.Add(1)
				}
			}
		})
	}

	kills := 0
	end := time.Now().Add(*load * 2)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(200+rand.IntN(400)) * time.Millisecond)
		g := gateways[kills%2]
		g.Kill()
		kills++
		g.Start()
		g.WaitReady(60 * time.Second)
	}
	close(stop)
	wg.Wait()

	var rollbacks int64
	if err := db.QueryRow(ctx, `SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&rollbacks); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bins.Path["shipctl"], "audit", "verify")
	cmd.Env = append(os.Environ(), s.Env...)
	out, err := cmd.CombinedOutput()
	verified := strings.TrimSpace(string(out))

	var entries, first, last, forks, creates, deletes, unaudited int64
	if err := db.QueryRow(ctx, `SELECT count(*), coalesce(min(seq), 0), coalesce(max(seq), 0),
		(SELECT count(*) FROM (SELECT prev_hash FROM audit_log WHERE seq IS NOT NULL GROUP BY prev_hash HAVING count(*) > 1) f),
		count(*) FILTER (WHERE action = 'package.create'), count(*) FILTER (WHERE action = 'package.delete'),
		(SELECT count(*) FROM packages p WHERE NOT EXISTS (
			SELECT 1 FROM audit_log a WHERE a.package_id = p.id AND a.action = 'package.create' AND a.seq IS NOT NULL))
		FROM audit_log WHERE seq IS NOT NULL`).Scan(&entries, &first, &last, &forks, &creates, &deletes, &unaudited); err != nil {
		t.Fatal(err)
	}
	record(t, "gateway SIGKILLs (two gateways, in turn)", kills)
	record(t, "creations 201 / deletions 204 / requests cut off by a kill / 5xx", itoa(created.Load())+" / "+itoa(deleted.Load())+" / "+itoa(cutOff.Load())+" / "+itoa(fivexx.Load()))
	record(t, "transactions rolled back in the database during the run", rollbacks-rollbacks0)
	record(t, "chain entries / seq first–last / forks", itoa(entries)+" / "+itoa(first)+"–"+itoa(last)+" / "+itoa(forks))
	record(t, "shipctl audit verify", verified)
	if err != nil || !strings.Contains(verified, "audit chain whole") {
		t.Errorf("shipctl audit verify after the kills: %v\n%s", err, out)
	}
	if entries != last-first+1 || first != 1 || forks != 0 {
		t.Errorf("%d chain entries numbered %d to %d with %d forks: want 1 to %d, no gap and no fork", entries, first, last, forks, entries)
	}
	if creates < created.Load() || deletes < deleted.Load() || unaudited != 0 {
		t.Errorf("%d package.create and %d package.delete entries for %d creations and %d deletions answered; %d packages without their entry",
			creates, deletes, created.Load(), deleted.Load(), unaudited)
	}
	if cutOff.Load() == 0 {
		t.Error("no kill cut off a request: the scenario proved nothing")
	}
	if fivexx.Load() > 0 {
		t.Errorf("%d requests answered 5xx", fivexx.Load())
	}
}
