package events_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventstest"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

func TestStreamsOptions(t *testing.T) {
	t.Parallel()
	names := []string{events.StreamEvents, events.StreamMail, events.StreamWebhooks}
	for _, tt := range []struct {
		name     string
		opts     []events.StreamOption
		replicas int
	}{
		{"default", nil, 1},
		{"three replicas", []events.StreamOption{events.WithReplicas(3)}, 3},
		{"last option wins", []events.StreamOption{events.WithReplicas(5), events.WithReplicas(3)}, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfgs := events.Streams(tt.opts...)
			if len(cfgs) != len(names) {
				t.Fatalf("%d streams, want %d", len(cfgs), len(names))
			}
			for i, cfg := range cfgs {
				if cfg.Name != names[i] || cfg.Replicas != tt.replicas || cfg.Storage != jetstream.FileStorage {
					t.Errorf("stream %d = %s with %d replicas on %v, want %s with %d on file storage",
						i, cfg.Name, cfg.Replicas, cfg.Storage, names[i], tt.replicas)
				}
			}
		})
	}
	// The options change copies, never the package's configurations.
	if got := events.EventsStream().Replicas; got != 1 {
		t.Errorf("EventsStream().Replicas = %d after options, want 1", got)
	}
}

func TestEnsureStreamRejectsReplicasOutOfRange(t *testing.T) {
	t.Parallel()
	for _, n := range []int{-1, 6} {
		cfg := events.EventsStream()
		events.WithReplicas(n)(&cfg)
		// Refused before any request: no connection is needed.
		err := events.EnsureStream(context.Background(), nil, cfg)
		if err == nil || !strings.Contains(err.Error(), "replicas") {
			t.Errorf("%d replicas: err = %v, want a replicas error", n, err)
		}
	}
}

// A single server cannot keep three copies: the error says so instead of a stream
// being silently left with one.
func TestEnsureStreamReplicasNeedACluster(t *testing.T) {
	t.Parallel()
	js := eventstest.Connect(t)
	cfg, _ := testStream(t, js, events.EventsStream())
	events.WithReplicas(3)(&cfg)
	err := events.EnsureStream(t.Context(), js, cfg)
	if err == nil {
		t.Fatalf("EnsureStream with 3 replicas on one server succeeded")
	}
	if !strings.Contains(err.Error(), cfg.Name) || !strings.Contains(err.Error(), "3 replicas") {
		t.Errorf("err = %v, want it to name the stream and its 3 replicas", err)
	}
}

// On a three-node cluster: instances starting at once through different servers create
// the real streams with three replicas and agree; a stream made with one replica is
// scaled to three (and back) by the next start, keeping its messages.
func TestEnsureStreamsOnCluster(t *testing.T) {
	t.Parallel()
	cluster := servicetest.StartNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	jss := make([]jetstream.JetStream, len(cluster.URLs))
	for i, u := range cluster.URLs {
		// Each "instance" is given the whole list, its own server first.
		list := append([]string{u}, cluster.URLs...)
		nc, err := nats.Connect(strings.Join(list, ","), nats.DontRandomize())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		if jss[i], err = jetstream.New(nc); err != nil {
			t.Fatal(err)
		}
	}

	waitPlacement(t, ctx, jss[0], 3)

	t.Run("concurrent first start", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 2*len(jss))
		for range 2 {
			for _, js := range jss {
				wg.Go(func() { errs <- events.EnsureStreams(ctx, js, events.WithReplicas(3)) })
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("concurrent EnsureStreams: %v", err)
			}
		}
		for _, name := range []string{events.StreamEvents, events.StreamMail, events.StreamWebhooks} {
			waitReplicas(t, ctx, jss[0], name, 3)
		}
		// Again, as a restart does: nothing changes, nothing fails.
		if err := events.EnsureStreams(ctx, jss[2], events.WithReplicas(3)); err != nil {
			t.Fatalf("EnsureStreams again: %v", err)
		}
		waitReplicas(t, ctx, jss[1], events.StreamEvents, 3)
	})

	t.Run("scale an existing stream", func(t *testing.T) {
		cfg := events.WebhooksStream()
		prefix := eventstest.Prefix()
		cfg.Name = eventstest.StreamName(prefix)
		cfg.Subjects = []string{prefix + ".>"}
		if err := events.EnsureStream(ctx, jss[0], cfg); err != nil {
			t.Fatal(err)
		}
		waitReplicas(t, ctx, jss[0], cfg.Name, 1)
		for i := range 5 {
			if _, err := jss[1].Publish(ctx, prefix+".job", []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range []int{3, 1} {
			events.WithReplicas(n)(&cfg)
			if err := events.EnsureStream(ctx, jss[2], cfg); err != nil {
				t.Fatalf("scale to %d replicas: %v", n, err)
			}
			info := waitReplicas(t, ctx, jss[0], cfg.Name, n)
			if info.State.Msgs != 5 {
				t.Errorf("after scaling to %d replicas: %d messages, want 5", n, info.State.Msgs)
			}
		}
	})
}

// waitPlacement polls until the cluster places a stream with n replicas: every server
// has joined the meta group and reported in. (EnsureStream itself retries "no suitable
// peers" for a few seconds only; a cluster of test processes on a busy machine may take
// longer to form.)
func waitPlacement(t *testing.T, ctx context.Context, js jetstream.JetStream, n int) {
	t.Helper()
	prefix := eventstest.Prefix()
	name := eventstest.StreamName(prefix)
	servicetest.WaitFor(t, 60*time.Second, "placement of a stream with "+string(rune('0'+n))+" replicas", func() bool {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := js.CreateStream(actx, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"}, Replicas: n, Storage: jetstream.MemoryStorage})
		return err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse)
	})
	if err := js.DeleteStream(ctx, name); err != nil {
		t.Fatal(err)
	}
}

// waitReplicas polls until the stream is configured with n replicas and its cluster
// reports a leader and n-1 current peers, and returns its info.
func waitReplicas(t *testing.T, ctx context.Context, js jetstream.JetStream, name string, n int) *jetstream.StreamInfo {
	t.Helper()
	var info *jetstream.StreamInfo
	servicetest.WaitFor(t, 30*time.Second, name+" with "+string(rune('0'+n))+" current replicas", func() bool {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return false
		}
		info = s.CachedInfo()
		if info.Config.Replicas != n || info.Cluster == nil || info.Cluster.Leader == "" {
			return false
		}
		current := 0
		for _, p := range info.Cluster.Replicas {
			if p.Current && !p.Offline {
				current++
			}
		}
		return len(info.Cluster.Replicas) == n-1 && current == n-1
	})
	return info
}

// TestConnect: a service's start connects through the URL list and creates the streams
// with the configured replicas.
func TestConnect(t *testing.T) {
	t.Parallel()
	cluster := servicetest.StartNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	nc, err := events.Connect(ctx, bus.Config{URL: cluster.URL(), StreamReplicas: 3}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, name := range []string{events.StreamEvents, events.StreamMail, events.StreamWebhooks} {
		waitReplicas(t, ctx, nc.JS, name, 3)
	}
}

// Another stream holding the subjects is not a creation race: EnsureStream fails at
// once (no retries) and says why.
func TestEnsureStreamSubjectsTakenByAnotherStream(t *testing.T) {
	t.Parallel()
	js := eventstest.Connect(t)
	cfg, prefix := testStream(t, js, events.EventsStream())
	other := jetstream.StreamConfig{Name: eventstest.StreamName(prefix + "other"), Subjects: []string{prefix + ".>"}}
	if _, err := js.CreateStream(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	eventstest.DeleteOnCleanup(t, js, other.Name)
	start := time.Now()
	err := events.EnsureStream(t.Context(), js, cfg)
	if err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("EnsureStream over another stream's subjects: err = %v, want the overlap", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("EnsureStream took %v: an overlap with another stream was retried", d)
	}
}
