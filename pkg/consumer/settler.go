package consumer

import (
	"log/slog"
	"runtime"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Settler settles the messages of many concurrent handlers from one goroutine, so that
// acknowledgements decided together leave together: an Ack is one small publish, and
// the NATS client writes what is buffered each time its flusher runs, which, when every
// handler acknowledges its own message, is once per message (a write syscall each, and
// a read on the server). The settler takes what is queued, first letting the other
// runnable goroutines (the handlers woken by the same group commit) queue theirs, and
// settles it all before its connection's flusher can run: one write for the lot.
//
// A message is settled after its handler has returned, at most a scheduling round
// later; a handler's decision is never lost while the settler runs, and Close settles
// everything queued before it returns.
type Settler struct {
	log  *slog.Logger
	name string
	q    chan settleItem
	done chan struct{}

	// mu guards closed: Settle holds it shared while it queues, Close exclusively
	// while it closes q, so no decision is sent on a closed queue.
	mu     sync.RWMutex
	closed bool
}

type settleItem struct {
	msg jetstream.Msg
	d   Decision
}

// settlerQueue is how many decisions may wait for the settler before Settle blocks.
const settlerQueue = 4096

// NewSettler starts a settler; Close stops it. name and log are for the line logged
// when a message cannot be settled.
func NewSettler(name string, log *slog.Logger) *Settler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Settler{log: log, name: name, q: make(chan settleItem, settlerQueue), done: make(chan struct{})}
	go s.loop()
	return s
}

// Settle queues msg to be settled as d says; once the settler is closed (a handler
// that outlived its dispatcher's shutdown), it settles msg itself.
func (s *Settler) Settle(msg jetstream.Msg, d Decision) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		s.settle(settleItem{msg: msg, d: d})
		return
	}
	s.q <- settleItem{msg: msg, d: d}
	s.mu.RUnlock()
}

// Close settles what is queued and stops the settler. A Settle after it settles its
// message at once.
func (s *Settler) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.q)
	}
	s.mu.Unlock()
	<-s.done
}

func (s *Settler) settle(it settleItem) { settleOrLog(s.log, s.name, it.msg, it.d) }

func (s *Settler) loop() {
	defer close(s.done)
	batch := make([]settleItem, 0, 256)
	for {
		it, ok := <-s.q
		if !ok {
			return
		}
		// The handlers readied with this one (a group commit answers many at once) run
		// first and queue their decisions.
		runtime.Gosched()
		batch = append(batch[:0], it)
	more:
		for len(batch) < cap(batch) {
			select {
			case it, ok := <-s.q:
				if !ok {
					break more
				}
				batch = append(batch, it)
			default:
				break more
			}
		}
		for i := range batch {
			s.settle(batch[i])
			batch[i] = settleItem{}
		}
	}
}
