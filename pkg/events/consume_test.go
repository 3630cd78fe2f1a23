package events_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventstest"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// workQueue is a test's own work-queue stream (like SHIPFILE_MAIL) with a durable
// consumer of ackWait on it, and n messages published on it.
func workQueue(t *testing.T, js jetstream.JetStream, ackWait time.Duration, n int) jetstream.Consumer {
	t.Helper()
	s, prefix := eventstest.Stream(t, js, events.MailStream())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := events.EnsureConsumer(ctx, js, s.CachedInfo().Config.Name, jetstream.ConsumerConfig{
		Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := js.Publish(ctx, fmt.Sprintf("%s.job", prefix), fmt.Appendf(nil, "job %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	return cons
}

// TestConsumeHandlesEveryMessageUntilStopped: batches of two, every message handled
// (a Nak'd one again, with NumDelivered 2), and Consume returns once its context is
// done.
func TestConsumeHandlesEveryMessageUntilStopped(t *testing.T) {
	t.Parallel()
	js := eventstest.Connect(t)
	cons := workQueue(t, js, 30*time.Second, 5)

	var mu sync.Mutex
	got := map[string][]uint64{} // body → NumDelivered of each delivery
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		events.Consume(ctx, cons, 2, 200*time.Millisecond, discard, func(msg jetstream.Msg) {
			mu.Lock()
			got[string(msg.Data())] = append(got[string(msg.Data())], events.NumDelivered(msg))
			first := string(msg.Data()) == "job 0" && len(got["job 0"]) == 1
			mu.Unlock()
			if first {
				_ = msg.Nak()
				return
			}
			_ = msg.Ack()
		})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		done := len(got) == 5 && len(got["job 0"]) == 2
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("handled %v within 20s", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Consume did not return within 5s of its context's end")
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range 5 {
		body := fmt.Sprintf("job %d", i)
		want := "[1]"
		if i == 0 {
			want = "[1 2]"
		}
		if fmt.Sprint(got[body]) != want {
			t.Errorf("%s delivered %v, want NumDelivered %s", body, got[body], want)
		}
	}
}

// TestConsumeReturnsMessagesFetchedWhileStopping: the handler stops the loop on the
// first message of a batch of three; the other two are not handled but returned at
// once (redelivered well before the 30s AckWait).
func TestConsumeReturnsMessagesFetchedWhileStopping(t *testing.T) {
	t.Parallel()
	js := eventstest.Connect(t)
	cons := workQueue(t, js, 30*time.Second, 3)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	handled := 0
	events.Consume(ctx, cons, 3, 2*time.Second, discard, func(msg jetstream.Msg) {
		handled++
		_ = msg.Ack()
		cancel()
	})
	if handled != 1 {
		t.Fatalf("%d messages handled after the stop, want 1", handled)
	}
	b, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var again []uint64
	for msg := range b.Messages() {
		again = append(again, events.NumDelivered(msg))
		_ = msg.Ack()
	}
	if fmt.Sprint(again) != "[2 2]" {
		t.Fatalf("redelivered within 5s: NumDelivered %v, want the two returned messages [2 2]", again)
	}
}

// TestKeepAliveHoldsTheMessage: a message held three times its AckWait with KeepAlive
// is not redelivered meanwhile; once stopped, it is redelivered after AckWait.
func TestKeepAliveHoldsTheMessage(t *testing.T) {
	t.Parallel()
	js := eventstest.Connect(t)
	const ackWait = time.Second
	cons := workQueue(t, js, ackWait, 1)

	b, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	msg, ok := <-b.Messages()
	if !ok {
		t.Fatalf("no message: %v", b.Error())
	}
	stop := events.KeepAlive(msg, ackWait/4)
	again, err := cons.Fetch(1, jetstream.FetchMaxWait(3*ackWait))
	if err != nil {
		t.Fatal(err)
	}
	for m := range again.Messages() {
		t.Fatalf("redelivered while kept alive (NumDelivered %d)", events.NumDelivered(m))
	}
	stop()
	again, err = cons.Fetch(1, jetstream.FetchMaxWait(3*ackWait))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := <-again.Messages()
	if !ok || events.NumDelivered(m) != 2 {
		t.Fatalf("after stop: %v %v, want the message again", m, again.Error())
	}
	_ = m.Ack()
}

// TestEvery calls at once, then on every tick, each call with a bounded context, and
// stops when its context ends.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		events.Every(ctx, 20*time.Millisecond, func(cctx context.Context) {
			if _, ok := cctx.Deadline(); !ok {
				t.Error("the call's context has no deadline")
			}
			if calls.Add(1) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Every did not stop after its context was cancelled")
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d calls, want 3 (the last one cancelled)", n)
	}
}
