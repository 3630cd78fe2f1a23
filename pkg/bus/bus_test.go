package bus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	t.Setenv("SHIPFILE_NATS_URL", "")
	t.Setenv("SHIPFILE_STREAM_REPLICAS", "")
	var c bus.Config
	if err := config.Load(&c); err != nil {
		t.Fatal(err)
	}
	if c.URL != "nats://127.0.0.1:4222" || c.StreamReplicas != 1 {
		t.Errorf("defaults = %q, %d replicas; want nats://127.0.0.1:4222, 1", c.URL, c.StreamReplicas)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}

	t.Setenv("SHIPFILE_NATS_URL", "nats://a:4222,nats://b:4222")
	t.Setenv("SHIPFILE_STREAM_REPLICAS", "3")
	if err := config.Load(&c); err != nil {
		t.Fatal(err)
	}
	if c.URL != "nats://a:4222,nats://b:4222" || c.StreamReplicas != 3 {
		t.Errorf("loaded %q, %d replicas; want the list and 3", c.URL, c.StreamReplicas)
	}
	for _, n := range []int{1, 3, 5} {
		if err := (bus.Config{StreamReplicas: n}).Validate(); err != nil {
			t.Errorf("%d replicas: %v", n, err)
		}
	}
	for _, n := range []int{-1, 0, 6} {
		err := (bus.Config{StreamReplicas: n}).Validate()
		if err == nil || !strings.Contains(err.Error(), "SHIPFILE_STREAM_REPLICAS") {
			t.Errorf("%d replicas: err = %v, want one naming SHIPFILE_STREAM_REPLICAS", n, err)
		}
	}
}

func TestConfigURLIsMaskedInLogs(t *testing.T) {
	c := bus.Config{URL: "nats://user:s3cret@nats-0:4222,nats://user:s3cret@nats-1:4222", StreamReplicas: 3}
	if got := config.LogValue(&c).String(); strings.Contains(got, "s3cret") {
		t.Errorf("logged config %s shows the password", got)
	}
}

// A list with a server that does not answer still connects, to the one that does;
// spaces around the commas do not matter.
func TestConnectURLList(t *testing.T) {
	t.Parallel()
	_, live := servicetest.StartNATS(t)
	dead := "nats://" + servicetest.FreeAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	c, err := bus.Connect(ctx, " "+dead+" , "+live+" ,", "shipfile-test")
	if err != nil {
		t.Fatalf("Connect(dead, live): %v", err)
	}
	defer c.Close()
	if got := c.NC.ConnectedUrl(); got != live {
		t.Errorf("connected to %q, want %q", got, live)
	}
	if err := c.Check(ctx); err != nil {
		t.Errorf("Check: %v", err)
	}
	if servers := c.NC.Servers(); !contains(servers, dead) || !contains(servers, live) {
		t.Errorf("server pool %v lacks %s or %s", servers, dead, live)
	}

	if c, err := bus.Connect(ctx, dead, "shipfile-test"); err == nil {
		c.Close()
		t.Errorf("Connect(dead) succeeded")
	}
}

// On a three-node cluster, the connection outlives the server it was on: it moves to
// another listed server and JetStream keeps answering.
func TestConnectFailsOverInCluster(t *testing.T) {
	t.Parallel()
	cluster := servicetest.StartNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, err := bus.Connect(ctx, cluster.URL(), "shipfile-test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := c.NC.ConnectedUrl()
	idx := -1
	for i, u := range cluster.URLs {
		if u == first {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatalf("connected to %q, not one of %v", first, cluster.URLs)
	}
	cluster.Kill(idx)
	servicetest.WaitFor(t, 30*time.Second, "a reconnect to another server with JetStream answering", func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		u := c.NC.ConnectedUrl()
		return u != "" && u != first && c.Check(cctx) == nil
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
