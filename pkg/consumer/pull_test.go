package consumer_test

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

	"github.com/shipfile/shipfile/pkg/consumer"
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

// TestPullHandlesEveryMessageUntilStopped: batches of two, every message handled
// (a Nak'd one again, with NumDelivered 2), and Pull returns once its context is
// done.
func TestPullHandlesEveryMessageUntilStopped(t *testing.T) {
	t.Parallel()
	js := eventstest.Connect(t)
	cons := workQueue(t, js, 30*time.Second, 5)

	var mu sync.Mutex
	got := map[string][]uint64{} // body → NumDelivered of each delivery
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		rt := consumer.NewSingle(func(_ context.Context, msg jetstream.Msg) consumer.Decision {
			mu.Lock()
			got[string(msg.Data())] = append(got[string(msg.Data())], consumer.NumDelivered(msg))
			first := string(msg.Data()) == "job 0" && len(got["job 0"]) == 1
			mu.Unlock()
			if first {
				return consumer.NakAfter(0)
			}
			return consumer.Acked()
		}, consumer.Options{Name: "worker", Log: discard})
		rt.Pull(ctx, ctx, cons, consumer.PullOptions{Batch: 2, Wait: 200 * time.Millisecond})
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
		t.Fatal("Pull did not return within 5s of its context's end")
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

// TestPullReturnsMessagesFetchedWhileStopping: the handler stops the loop on the
// first message of a batch of three; the other two are not handled but returned at
// once (redelivered well before the 30s AckWait).
func TestPullReturnsMessagesFetchedWhileStopping(t *testing.T) {
	t.Parallel()
	js := eventstest.Connect(t)
	cons := workQueue(t, js, 30*time.Second, 3)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	handled := 0
	rt := consumer.NewSingle(func(context.Context, jetstream.Msg) consumer.Decision {
		handled++
		cancel()
		return consumer.Acked()
	}, consumer.Options{Name: "worker", Log: discard})
	rt.Pull(ctx, context.Background(), cons, consumer.PullOptions{Batch: 3, Wait: 2 * time.Second})
	if handled != 1 {
		t.Fatalf("%d messages handled after the stop, want 1", handled)
	}
	b, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var again []uint64
	for msg := range b.Messages() {
		again = append(again, consumer.NumDelivered(msg))
		_ = msg.Ack()
	}
	if fmt.Sprint(again) != "[2 2]" {
		t.Fatalf("redelivered within 5s: NumDelivered %v, want the two returned messages [2 2]", again)
	}
}

// TestKeepAliveHoldsTheMessage: a message whose handler holds it three times its
// AckWait inside KeepAlive is not redelivered meanwhile; once the handler returned, it
// is redelivered after AckWait.
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
	// The handler holds the message for three AckWaits, fetching meanwhile.
	var redelivered []uint64
	kept := consumer.KeepAlive(ackWait / 4)(func(context.Context, []jetstream.Msg) []consumer.Decision {
		again, err := cons.Fetch(1, jetstream.FetchMaxWait(3*ackWait))
		if err != nil {
			t.Error(err)
			return nil
		}
		for m := range again.Messages() {
			redelivered = append(redelivered, consumer.NumDelivered(m))
		}
		return nil
	})
	kept(context.Background(), []jetstream.Msg{msg})
	if len(redelivered) > 0 {
		t.Fatalf("redelivered while kept alive (NumDelivered %v)", redelivered)
	}
	again, err := cons.Fetch(1, jetstream.FetchMaxWait(3*ackWait))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := <-again.Messages()
	if !ok || consumer.NumDelivered(m) != 2 {
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
		consumer.Every(ctx, 20*time.Millisecond, func(cctx context.Context) {
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

// TestPullTogetherHandsTheBatchAtOnce: a together loop hands what is there to the
// batch handler in one call (the first fetch waits, the rest is taken without
// waiting), and settles each message as its own decision says.
func TestPullTogetherHandsTheBatchAtOnce(t *testing.T) {
	t.Parallel()
	js := eventstest.Connect(t)
	cons := workQueue(t, js, 30*time.Second, 4)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sizes []int
	seen := map[string]int{}
	rt := consumer.New(func(_ context.Context, msgs []jetstream.Msg) []consumer.Decision {
		sizes = append(sizes, len(msgs))
		out := make([]consumer.Decision, len(msgs))
		for i, m := range msgs {
			seen[string(m.Data())]++
			if string(m.Data()) == "job 1" && seen["job 1"] == 1 {
				out[i] = consumer.NakAfter(0)
			} else {
				out[i] = consumer.Acked()
			}
		}
		if len(seen) == 4 && seen["job 1"] == 2 {
			cancel()
		}
		return out
	}, consumer.Options{Name: "worker", Log: discard})
	done := make(chan struct{})
	go func() {
		defer close(done)
		rt.Pull(ctx, ctx, cons, consumer.PullOptions{Batch: 10, Wait: 200 * time.Millisecond, Together: true})
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cancel()
		<-done
		t.Fatalf("batches %v saw %v within 20s", sizes, seen)
	}
	if len(sizes) == 0 || sizes[0] != 4 {
		t.Fatalf("batch sizes %v, want the four published messages in the first batch", sizes)
	}
}

// TestPullLingersOnlyWhenBusy: a together loop with a Linger handles a lone message at
// once, and when others wait beside the first, takes what arrives within the Linger
// in the same batch.
func TestPullLingersOnlyWhenBusy(t *testing.T) {
	t.Parallel()
	js := eventstest.Connect(t)
	s, prefix := eventstest.Stream(t, js, events.MailStream())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cons, err := events.EnsureConsumer(ctx, js, s.CachedInfo().Config.Name, jetstream.ConsumerConfig{
		Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(n int) {
		for range n {
			if _, err := js.Publish(ctx, prefix+".job", []byte("job")); err != nil {
				t.Error(err)
			}
		}
	}
	batches := make(chan int, 16)
	rt := consumer.New(func(_ context.Context, msgs []jetstream.Msg) []consumer.Decision {
		batches <- len(msgs)
		out := make([]consumer.Decision, len(msgs))
		for i := range out {
			out[i] = consumer.Acked()
		}
		return out
	}, consumer.Options{Name: "worker", Log: discard})
	const linger = 3 * time.Second
	// Busy: two messages wait before the loop starts, so its first fetch takes one and
	// finds the other beside it; three more come within the linger.
	publish(2)
	late := make(chan struct{})
	time.AfterFunc(300*time.Millisecond, func() { defer close(late); publish(3) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		rt.Pull(ctx, ctx, cons, consumer.PullOptions{Batch: 100, Wait: 200 * time.Millisecond, Together: true, Linger: linger})
	}()
	defer func() { cancel(); <-done; <-late }()
	select {
	case n := <-batches:
		if n != 5 {
			t.Fatalf("a busy queue: a batch of %d, want the 5 published within the linger", n)
		}
	case <-time.After(2 * linger):
		t.Fatal("no batch")
	}

	// Quiet: a lone message is handled at once.
	<-late
	publish(1)
	start := time.Now()
	select {
	case n := <-batches:
		if n != 1 || time.Since(start) >= linger {
			t.Fatalf("a lone message: a batch of %d after %s, want 1 before the linger (%s)", n, time.Since(start), linger)
		}
	case <-time.After(linger):
		t.Fatalf("a lone message was held back for the linger")
	}
}
