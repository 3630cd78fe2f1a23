package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventstest"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/transport"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

// childOptionsEnv, when set, makes the test binary run the service itself (the real
// run, configured by the environment) on the streams named in its JSON: the tests
// start such children to kill them.
const childOptionsEnv = "SHIPFILE_WEBHOOKS_TEST_CHILD_OPTIONS"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childOptionsEnv); spec != "" {
		var opts transport.Options
		if err := json.Unmarshal([]byte(spec), &opts); err != nil {
			os.Stderr.WriteString("bad " + childOptionsEnv + ": " + err.Error() + "\n")
			os.Exit(2)
		}
		dispatchOptions = func() transport.Options { return opts }
		os.Args = os.Args[:1]
		service.Main("webhooks", run)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestLifecycle(t *testing.T) {
	js := eventstest.Connect(t)
	streams := webhooktest.NewStreams(t, js)
	saved := dispatchOptions
	dispatchOptions = func() transport.Options { return streams.Options }
	t.Cleanup(func() { dispatchOptions = saved })

	addr := servicetest.FreeAddr(t)
	t.Setenv("SHIPFILE_WEBHOOKS_ADDR", addr)
	t.Setenv("SHIPFILE_DATABASE_URL", schematest.New(t))
	t.Setenv("SHIPFILE_SECRET_KEY", servicetest.SecretKey)
	servicetest.Lifecycle(t, run, addr)
}

// The durable consumers are named by SHIPFILE_WEBHOOK_DELIVER_CONSUMER (what a KEDA
// ScaledObject watches): name-<hook id> on the events stream, name-retry and
// name-queued on the jobs stream; SHIPFILE_WEBHOOK_FANOUT_CONSUMER names the fan-out
// consumer of earlier versions, which is deleted.
func TestConsumerNamesFromConfig(t *testing.T) {
	js := eventstest.Connect(t)
	streams := webhooktest.NewStreams(t, js)
	saved := dispatchOptions
	dispatchOptions = func() transport.Options { return streams.Options }
	t.Cleanup(func() { dispatchOptions = saved })
	pool, dbURL := schematest.Pool(t)
	hook := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "http://127.0.0.1:9/", Secret: webhooktest.NewSecret()})
	// An earlier version's fan-out consumer, under the configured name.
	if _, err := js.CreateConsumer(t.Context(), streams.Options.EventsStream, jetstream.ConsumerConfig{
		Durable: "custom-fanout", FilterSubject: streams.Options.EventsFilter, AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHIPFILE_WEBHOOKS_ADDR", servicetest.FreeAddr(t))
	t.Setenv("SHIPFILE_DATABASE_URL", dbURL)
	t.Setenv("SHIPFILE_SECRET_KEY", servicetest.SecretKey)
	t.Setenv("SHIPFILE_WEBHOOK_FANOUT_CONSUMER", "custom-fanout")
	t.Setenv("SHIPFILE_WEBHOOK_DELIVER_CONSUMER", "custom-deliver")

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, slog.New(slog.NewTextHandler(t.Output(), nil)), nil) }()
	for _, c := range []struct{ stream, consumer string }{
		{streams.Options.EventsStream, "custom-deliver-" + strconv.FormatInt(hook, 10)},
		{streams.Options.JobsStream, "custom-deliver-retry"},
		{streams.Options.JobsStream, "custom-deliver-queued"},
	} {
		servicetest.WaitFor(t, 20*time.Second, "consumer "+c.consumer+" on "+c.stream, func() bool {
			_, err := js.Consumer(t.Context(), c.stream, c.consumer)
			return err == nil
		})
	}
	servicetest.WaitFor(t, 20*time.Second, "the earlier version's fan-out consumer deleted", func() bool {
		_, err := js.Consumer(t.Context(), streams.Options.EventsStream, "custom-fanout")
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	})
	for _, c := range []struct{ stream, consumer string }{
		{streams.Options.EventsStream, streams.Options.HookConsumer(hook)},
		{streams.Options.JobsStream, transport.RetryConsumer},
		{streams.Options.JobsStream, transport.QueuedConsumer},
	} {
		if _, err := js.Consumer(t.Context(), c.stream, c.consumer); err == nil {
			t.Errorf("the default consumer %s exists on %s too", c.consumer, c.stream)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return within 30s of its cancellation")
	}
}

// TestRefusesToStartWithoutSecretKey: the dispatcher decrypts the webhook secrets, so
// without SHIPFILE_SECRET_KEY it stops at once with an error naming the variable.
func TestRefusesToStartWithoutSecretKey(t *testing.T) {
	t.Setenv("SHIPFILE_SECRET_KEY", "")
	t.Setenv("SHIPFILE_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none") // never reached
	err := run(t.Context(), slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.Contains(err.Error(), "SHIPFILE_SECRET_KEY is not set") {
		t.Fatalf("run = %v, want an error saying SHIPFILE_SECRET_KEY is not set", err)
	}
}

func TestUsageListsEveryVariable(t *testing.T) {
	var buf bytes.Buffer
	config.Usage(&buf, "webhooks", &Config{})
	for _, v := range []string{"SHIPFILE_WEBHOOKS_ADDR", "SHIPFILE_DATABASE_URL", "SHIPFILE_NATS_URL",
		"SHIPFILE_WEBHOOK_ALLOW_PRIVATE", "SHIPFILE_WEBHOOK_RETRY_SCHEDULE", "SHIPFILE_WEBHOOK_TIMEOUT",
		"SHIPFILE_WEBHOOK_WORKERS", "SHIPFILE_WEBHOOK_HEALTH_INTERVAL", "SHIPFILE_WEBHOOK_DISABLE_AFTER",
		"SHIPFILE_WEBHOOK_ACK_WAIT", "SHIPFILE_WEBHOOK_MAX_ACK_PENDING", "SHIPFILE_SHUTDOWN_TIMEOUT",
		"SHIPFILE_STREAM_REPLICAS", "SHIPFILE_WEBHOOK_FANOUT_CONSUMER", "SHIPFILE_WEBHOOK_DELIVER_CONSUMER",
		"SHIPFILE_WEBHOOK_LOG_RETENTION"} {
		if !strings.Contains(buf.String(), v) {
			t.Errorf("--help lacks %s", v)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		return Config{Timeout: 10 * time.Second, Workers: 16, HealthInterval: 5 * time.Second, MaxAckPending: 100, NATS: bus.Config{StreamReplicas: 1}}
	}
	c := base()
	if err := c.Validate(); err != nil || c.AckWait != 15*time.Second {
		t.Fatalf("defaults: %v, AckWait %s (want timeout + 5s)", err, c.AckWait)
	}
	if c.FanoutConsumer != "webhooks-fanout" || c.DeliverConsumer != "webhooks-deliver" {
		t.Errorf("consumers = %q, %q; want webhooks-fanout, webhooks-deliver", c.FanoutConsumer, c.DeliverConsumer)
	}
	for name, mod := range map[string]func(*Config){
		"ack wait not above timeout": func(c *Config) { c.AckWait = 10 * time.Second },
		"no workers":                 func(c *Config) { c.Workers = 0 },
		"no timeout":                 func(c *Config) { c.Timeout = 0 },
		"zero wait in schedule":      func(c *Config) { c.RetrySchedule = []time.Duration{time.Second, 0} },
		"no health interval":         func(c *Config) { c.HealthInterval = 0 },
		"consumer name with a dot":   func(c *Config) { c.DeliverConsumer = "webhooks.deliver" },
		"one consumer for both":      func(c *Config) { c.FanoutConsumer, c.DeliverConsumer = "w", "w" },
		"no stream replicas":         func(c *Config) { c.NATS.StreamReplicas = 0 },
		"six stream replicas":        func(c *Config) { c.NATS.StreamReplicas = 6 },
	} {
		c := base()
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// child is a dispatcher process: the test binary running the service.
type child struct {
	cmd  *exec.Cmd
	addr string
	log  string
}

func startChild(t *testing.T, name string, opts transport.Options, env []string) *child {
	t.Helper()
	spec, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	c := &child{addr: servicetest.FreeAddr(t), log: filepath.Join(t.TempDir(), name+".log")}
	logFile, err := os.Create(c.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	c.cmd = exec.Command(os.Args[0])
	c.cmd.Env = append(os.Environ(), append(env, childOptionsEnv+"="+string(spec), "SHIPFILE_WEBHOOKS_ADDR="+c.addr)...)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
		if t.Failed() {
			b, _ := os.ReadFile(c.log)
			t.Logf("%s's log:\n%s", name, b)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + c.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(c.log)
			t.Fatalf("%s not ready within 30s: %v\n%s", name, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAtLeastOnceWhenAnInstanceIsKilled runs two dispatcher processes on shared
// consumers, SIGKILLs one in the middle of a burst of 50 events, and checks that every
// delivery still reaches the receiver (at least once) and ends succeeded, so the
// killed instance's max_in_flight slots came back; the survivor then stops cleanly on
// SIGTERM.
func TestAtLeastOnceWhenAnInstanceIsKilled(t *testing.T) {
	js := eventstest.Connect(t)
	streams := webhooktest.NewStreams(t, js)
	pool, dbURL := schematest.Pool(t)
	rc := webhooktest.NewReceiver(t, webhooktest.NewSecret(), func(int, webhooktest.Request) webhooktest.Answer {
		return webhooktest.Answer{Delay: 30 * time.Millisecond}
	})
	// Two slots across both instances: the killed one dies holding some, which must
	// come back after the ack wait (2s) or the rest would never be delivered.
	hook := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: rc.URL, Secret: rc.Secret, MaxInFlight: 2})

	opts := streams.Options
	opts.FetchWait = 500 * time.Millisecond
	env := []string{
		"SHIPFILE_DATABASE_URL=" + dbURL,
		"SHIPFILE_NATS_URL=" + eventstest.URL(),
		"SHIPFILE_WEBHOOK_ALLOW_PRIVATE=true",
		servicetest.SecretKeyEnv,
		"SHIPFILE_WEBHOOK_RETRY_SCHEDULE=200ms,200ms,200ms,200ms,200ms,200ms,200ms",
		"SHIPFILE_WEBHOOK_TIMEOUT=1s",
		"SHIPFILE_WEBHOOK_ACK_WAIT=2s", // redelivery of the killed instance's jobs
		"SHIPFILE_WEBHOOK_WORKERS=4",
		"SHIPFILE_SHUTDOWN_TIMEOUT=10s",
		"SHIPFILE_LOG_LEVEL=info",
	}
	a := startChild(t, "instance-a", opts, env)
	b := startChild(t, "instance-b", opts, env)

	const n = 50
	for range n {
		streams.Publish(t, js, webhooktest.Envelope(events.TypePackageFinalized, 0))
	}
	rc.WaitN(t, n/4, 30*time.Second)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()

	rc.WaitFor(t, 60*time.Second, "every delivery", func(reqs []webhooktest.Request) bool {
		got := map[string]bool{}
		for _, r := range reqs {
			if r.ServiceSignatureOK && r.StandardSignatureOK {
				got[r.Delivery] = true
			}
		}
		return len(got) == n
	})
	webhooktest.Eventually(t, 30*time.Second, "every delivery succeeded", func() bool {
		ds := webhooktest.Deliveries(t, pool, hook)
		for _, d := range ds {
			if d.Status != app.StatusSucceeded {
				return false
			}
		}
		return len(ds) == n
	})
	t.Logf("%d requests for %d deliveries", len(rc.Requests()), n)

	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("instance-b after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("instance-b did not stop within 30s of SIGTERM")
	}
}
