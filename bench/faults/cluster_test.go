//go:build faults

package faults

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestNATSClusterNodeLoss: the services run on a three-node NATS cluster (all three URLs
// in SHIPFILE_NATS_URL, streams with three replicas); under load the node leading
// SHIPFILE_EVENTS is SIGKILLed. The API keeps answering, every committed event is in the
// stream once, every delivery arrives, and the services stay ready.
func TestNATSClusterNodeLoss(t *testing.T) {
	cluster := servicetest.StartNATSCluster(t, 3)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: cluster.URL(), LogOutbox: true, Env: []string{"SHIPFILE_STREAM_REPLICAS=3"}})
	s.StartGateway("SHIPFILE_RATE_LIMIT=0")
	d1 := s.StartService("webhooks", dispatcherEnv...)
	d2 := s.StartService("webhooks", dispatcherEnv...)
	rcv := rig.StartReceiver(t)
	hooks := subscribe(t, s, rcv, 2)

	js := rig.JetStream(t, cluster.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info := stream.CachedInfo()
	record(t, "SHIPFILE_EVENTS replicas", info.Config.Replicas)
	if info.Config.Replicas != 3 || info.Cluster == nil {
		t.Fatalf("SHIPFILE_EVENTS has %d replicas, want 3 (SHIPFILE_STREAM_REPLICAS)", info.Config.Replicas)
	}
	leader := info.Cluster.Leader
	node, err := strconv.Atoi(strings.TrimPrefix(leader, "n"))
	if err != nil {
		t.Fatalf("stream leader %q is not one of n1..n3", leader)
	}

	l := startCreating(s.API, 4, 20*time.Millisecond)
	time.Sleep(*load / 3)
	atKill := l.ok.Load()
	cluster.Kill(node - 1)
	record(t, "node killed (the SHIPFILE_EVENTS leader)", leader)
	time.Sleep(*load * 2 / 3)
	l.stop()
	record(t, "packages created before / after the kill", fmt.Sprintf("%d / %d", atKill, l.ok.Load()-atKill))
	if l.ok.Load() == atKill {
		t.Error("no package was created after the node was killed")
	}

	db := rig.DB(t, s.DBURL)
	rig.WaitOutboxPublished(t, db, 60*time.Second)
	ev := rig.CompareExactlyOnce(rig.OutboxMsgIDs(t, db, events.SubjectPrefix), rig.StreamMsgIDs(t, js, events.StreamEvents))
	record(t, "events committed / in SHIPFILE_EVENTS / lost / duplicated / foreign", exactly(ev))
	if !ev.Ok() {
		t.Errorf("events %+v: want each committed one exactly once", ev)
	}
	checkDeliveries(t, db, rcv, hooks, l, 90*time.Second)
	for _, p := range []*rig.Proc{s.Gateway, d1, d2} {
		p.WaitReady(30 * time.Second)
	}
	record(t, "services ready after the loss (gateway, 2 dispatchers)", "yes")
	s.API.MustCreatePackage(t, rig.PackageBody("after the loss"))
}
