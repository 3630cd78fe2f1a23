package consumer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/msgerr"
)

// fakeMsg records how it was settled; it needs no server. Methods the runtime does not
// call panic (the embedded nil interface).
type fakeMsg struct {
	jetstream.Msg
	data      string
	delivered uint64

	header     nats.Header
	mu         sync.Mutex
	settled    []string // "ack", "nak", "nak 3s", "term"
	inProgress int
}

func (m *fakeMsg) Headers() nats.Header { return m.header }

func msg(data string, delivered uint64) *fakeMsg { return &fakeMsg{data: data, delivered: delivered} }

func (m *fakeMsg) Data() []byte    { return []byte(m.data) }
func (m *fakeMsg) Subject() string { return "test." + m.data }
func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{NumDelivered: m.delivered}, nil
}
func (m *fakeMsg) settle(s string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settled = append(m.settled, s)
	return nil
}
func (m *fakeMsg) Ack() error  { return m.settle("ack") }
func (m *fakeMsg) Nak() error  { return m.settle("nak") }
func (m *fakeMsg) Term() error { return m.settle("term") }
func (m *fakeMsg) NakWithDelay(d time.Duration) error {
	return m.settle("nak " + d.String())
}
func (m *fakeMsg) InProgress() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inProgress++
	return nil
}
func (m *fakeMsg) Settled() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.settled, ",")
}

// logBuffer is a logger writing to a buffer the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestProcessSettlesAsDecided: each decision becomes exactly one settlement; a Retry
// backs off by the delivery count (the default: 1s doubling); a Term is logged with
// its reason and recorded.
func TestProcessSettlesAsDecided(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		decision  consumer.Decision
		delivered uint64
		want      string
	}{
		{"ack", consumer.Acked(), 1, "ack"},
		{"nak at once", consumer.NakAfter(0), 1, "nak"},
		{"nak after a delay", consumer.NakAfter(3 * time.Second), 1, "nak 3s"},
		{"retry, first delivery", consumer.Failed(errors.New("db down")), 1, "nak 1s"},
		{"retry, third delivery", consumer.Failed(errors.New("db down")), 3, "nak 4s"},
		{"retry, capped", consumer.Failed(errors.New("db down")), 30, "nak 1m0s"},
		{"term", consumer.Poison("not a protobuf"), 1, "term"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs logBuffer
			var recorded []string
			rt := consumer.NewSingle(func(context.Context, jetstream.Msg) consumer.Decision { return tc.decision }, consumer.Options{
				Name: "test-consumer",
				Log:  slog.New(slog.NewTextHandler(&logs, nil)),
				OnPoison: func(_ context.Context, m jetstream.Msg, reason string) {
					recorded = append(recorded, string(m.Data())+": "+reason)
				},
			})
			m := msg("job", tc.delivered)
			rt.Process(context.Background(), m)
			if got := m.Settled(); got != tc.want {
				t.Fatalf("settled %q, want %q", got, tc.want)
			}
			if tc.decision.Action == consumer.Term {
				if len(recorded) != 1 || recorded[0] != "job: not a protobuf" {
					t.Errorf("recorded %q, want the poison reason", recorded)
				}
				if !strings.Contains(logs.String(), "poison message terminated") || !strings.Contains(logs.String(), "not a protobuf") {
					t.Errorf("log %q lacks the poison line with its reason", logs.String())
				}
			} else if len(recorded) > 0 {
				t.Errorf("recorded %q for a %v", recorded, tc.decision.Action)
			}
			if tc.decision.Action == consumer.Retry && !strings.Contains(logs.String(), "db down") {
				t.Errorf("log %q lacks the retried failure", logs.String())
			}
		})
	}
}

// TestBackoffUsesTheGivenSchedule: Options.Backoff replaces the default back-off.
func TestBackoffUsesTheGivenSchedule(t *testing.T) {
	t.Parallel()
	rt := consumer.NewSingle(func(context.Context, jetstream.Msg) consumer.Decision {
		return consumer.Failed(errors.New("x"))
	}, consumer.Options{Backoff: func(n uint64) time.Duration { return time.Duration(n) * time.Minute }})
	m := msg("job", 5)
	rt.Process(context.Background(), m)
	if got := m.Settled(); got != "nak 5m0s" {
		t.Fatalf("settled %q, want nak 5m0s", got)
	}
}

// TestBatchDecisionsPerMessage: a batch handler's decisions settle their own message;
// a decision it did not return is a Retry, not an Ack.
func TestBatchDecisionsPerMessage(t *testing.T) {
	t.Parallel()
	rt := consumer.New(func(_ context.Context, msgs []jetstream.Msg) []consumer.Decision {
		if len(msgs) != 4 {
			t.Errorf("batch of %d, want 4", len(msgs))
		}
		return []consumer.Decision{consumer.Acked(), consumer.Poison("bad"), consumer.NakAfter(time.Second)}
	}, consumer.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ms := []*fakeMsg{msg("a", 1), msg("b", 1), msg("c", 1), msg("d", 2)}
	rt.Process(context.Background(), ms[0], ms[1], ms[2], ms[3])
	var got []string
	for _, m := range ms {
		got = append(got, m.Settled())
	}
	if want := "ack|term|nak 1s|nak 2s"; strings.Join(got, "|") != want {
		t.Fatalf("settled %q, want %q", strings.Join(got, "|"), want)
	}
}

// TestRecoverRetriesAfterAPanic: a panicking handler does not crash the consumer; its
// message backs off like a transient failure and the panic is logged.
func TestRecoverRetriesAfterAPanic(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	rt := consumer.NewSingle(func(context.Context, jetstream.Msg) consumer.Decision { panic("boom") },
		consumer.Options{Name: "c", Log: slog.New(slog.NewTextHandler(&logs, nil))})
	m := msg("job", 2)
	rt.Process(context.Background(), m)
	if got := m.Settled(); got != "nak 2s" {
		t.Fatalf("settled %q, want nak 2s", got)
	}
	if !strings.Contains(logs.String(), "boom") {
		t.Fatalf("log %q lacks the panic", logs.String())
	}
}

// TestKeepAliveReportsProgress: while a handler runs, every message of its batch is
// reported in progress every interval; after it returned, no more.
func TestKeepAliveReportsProgress(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	ms := []*fakeMsg{msg("a", 1), msg("b", 1)}
	rt := consumer.New(func(context.Context, []jetstream.Msg) []consumer.Decision {
		<-release
		return []consumer.Decision{consumer.Acked(), consumer.Acked()}
	}, consumer.Options{KeepAlive: 5 * time.Millisecond})
	done := make(chan struct{})
	go func() { defer close(done); rt.Process(context.Background(), ms[0], ms[1]) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ms[0].mu.Lock()
		a := ms[0].inProgress
		ms[0].mu.Unlock()
		ms[1].mu.Lock()
		b := ms[1].inProgress
		ms[1].mu.Unlock()
		if a >= 3 && b >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("in progress %d and %d times within 5s, want 3 each", a, b)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	<-done
	ms[0].mu.Lock()
	after := ms[0].inProgress
	ms[0].mu.Unlock()
	time.Sleep(30 * time.Millisecond)
	ms[0].mu.Lock()
	defer ms[0].mu.Unlock()
	if ms[0].inProgress != after {
		t.Fatalf("in progress reported after the handler returned (%d → %d)", after, ms[0].inProgress)
	}
	if ms[0].settled[0] != "ack" {
		t.Fatalf("settled %v", ms[0].settled)
	}
}

// TestInstrumentCountsOutcomes: the metrics count each settled message by consumer
// and final outcome (a Retry counts as the nak it became).
func TestInstrumentCountsOutcomes(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := consumer.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	decisions := []consumer.Decision{consumer.Acked(), consumer.Acked(), consumer.Failed(errors.New("x")), consumer.Poison("p")}
	i := 0
	rt := consumer.NewSingle(func(context.Context, jetstream.Msg) consumer.Decision { i++; return decisions[i-1] },
		consumer.Options{Name: "mailer", Metrics: m})
	for range decisions {
		rt.Process(context.Background(), msg("x", 1))
	}
	for outcome, want := range map[string]float64{"ack": 2, "nak": 1, "term": 1, "retry": 0} {
		if got := testutil.ToFloat64(m.Messages.WithLabelValues("mailer", outcome)); got != want {
			t.Errorf("%s: %v, want %v", outcome, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.Duration); n != 1 {
		t.Errorf("%d duration series, want 1", n)
	}
}

// TestGroupGivesWorkItsGrace: after ctx is done, work running on the work context may
// finish within the grace period; past it, the work context is cancelled.
func TestGroupGivesWorkItsGrace(t *testing.T) {
	t.Parallel()
	t.Run("finishes in time", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		g := consumer.NewGroup(ctx)
		g.Go(func() {
			<-ctx.Done()
			time.Sleep(10 * time.Millisecond)
			if g.Work().Err() != nil {
				t.Error("work cancelled within the grace period")
			}
		})
		cancel()
		if g.Wait(5 * time.Second) {
			t.Fatal("reported abandoned")
		}
	})
	t.Run("abandoned", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		g := consumer.NewGroup(ctx)
		g.Go(func() { <-g.Work().Done() })
		cancel()
		if !g.Wait(20 * time.Millisecond) {
			t.Fatal("not reported abandoned")
		}
	})
}

// TestDecide: what a handler's domain code returns becomes one decision.
func TestDecide(t *testing.T) {
	t.Parallel()
	cause := errors.New("smtp down")
	tests := []struct {
		name string
		err  error
		want consumer.Decision
	}{
		{"done", nil, consumer.Decision{Action: consumer.Ack}},
		{"poison", msgerr.Poison(errors.New("bad body")), consumer.Decision{Action: consumer.Term, Reason: "bad body"}},
		{"retry after, logged by the handler", msgerr.RetryAfter(time.Minute, nil), consumer.Decision{Action: consumer.Nak, Delay: time.Minute}},
		{"retry after, with a cause", msgerr.RetryAfter(time.Second, cause), consumer.Decision{Action: consumer.Nak, Delay: time.Second, Reason: "smtp down"}},
		{"retry at once", msgerr.RetryAfter(0, nil), consumer.Decision{Action: consumer.Nak}},
		{"another error", cause, consumer.Decision{Action: consumer.Retry, Reason: "smtp down"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := consumer.Decide(tt.err); got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}
