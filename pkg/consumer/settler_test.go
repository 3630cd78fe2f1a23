package consumer_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/consumer"
)

// TestSettlerSettlesEveryMessageOnce: messages processed by many concurrent handlers
// through a runtime with a Settler are each settled once, as decided, and Close
// returns only once all of them are.
func TestSettlerSettlesEveryMessageOnce(t *testing.T) {
	s := consumer.NewSettler("test", nil)
	r := consumer.NewSingle(func(_ context.Context, m jetstream.Msg) consumer.Decision {
		n, _ := strconv.Atoi(string(m.Data()))
		switch n % 3 {
		case 0:
			return consumer.Acked()
		case 1:
			return consumer.NakAfter(time.Second)
		default:
			return consumer.Poison("bad")
		}
	}, consumer.Options{Name: "test", Settler: s})

	const handlers, each = 16, 500
	msgs := make([]*fakeMsg, handlers*each)
	for i := range msgs {
		msgs[i] = msg(strconv.Itoa(i), 1)
	}
	var wg sync.WaitGroup
	for h := range handlers {
		wg.Go(func() {
			for i := h * each; i < (h+1)*each; i++ {
				r.Process(context.Background(), msgs[i])
			}
		})
	}
	wg.Wait()
	s.Close()
	want := []string{"ack", "nak 1s", "term"}
	for i, m := range msgs {
		if got := m.Settled(); got != want[i%3] {
			t.Fatalf("message %d settled %q, want %q once", i, got, want[i%3])
		}
	}
	s.Close() // a second Close returns at once
}

// TestSettlerAfterClose: a handler that outlives the settler (an attempt abandoned at
// shutdown that ends later) still has its message settled, at once, instead of a send
// on the closed queue.
func TestSettlerAfterClose(t *testing.T) {
	s := consumer.NewSettler("test", nil)
	s.Close()
	m := msg("late", 1)
	s.Settle(m, consumer.NakAfter(0))
	if got := m.Settled(); got != "nak" {
		t.Fatalf("message settled %q after Close, want a nak", got)
	}
}
