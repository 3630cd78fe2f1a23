package httpx

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// ErrTooSlow is the read error of a body that brought fewer bytes than its minimum
// rate asks for over a window.
var ErrTooSlow = errors.New("request body too slow: fewer bytes than the minimum rate over the window")

// ErrStopped is the read error of a body that Stop ended.
var ErrStopped = errors.New("request body: the server stopped reading it")

// MinRateBody wraps a request body so that it must bring at least minRate bytes a
// second, counted over windows of window: within every window of time spent
// waiting for the body, it must bring minRate×window bytes (the next window starts
// once it has). A body that falls behind (a client that sends one part and stalls,
// or trickles a byte at a time) fails with ErrTooSlow once a window of waiting has
// passed, even while a Read is blocked: before each Read the connection's read
// deadline (set through setDeadline, usually http.ResponseController's) is moved to
// the end of the window's waiting time, and when no deadline can be set a timer
// closes the body instead.
//
// Only the time spent in Read counts: while the server is busy elsewhere (storing
// the part it has read, say) the client is not charged, so a slow object store
// does not cut off a client that keeps up.
//
// It is one wrapper for every upload route (multipart uploads and tus PATCH), and
// the server may end the body's reading with Stop. minRate <= 0 or window <= 0 sets
// no minimum (the body can still be stopped).
func MinRateBody(body io.ReadCloser, minRate int64, window time.Duration, setDeadline func(time.Time) error) io.ReadCloser {
	return newRateBody(body, minRate, window, 0, setDeadline)
}

// LimitBody is MinRateBody with a time limit on the whole body too: a body not read
// to its end within timeout of this call fails with ErrTooSlow (at the timeout, even
// while a Read is blocked). It bounds the small bodies of every other route (JSON
// and forms), which have no business arriving slowly. timeout <= 0 sets no limit;
// minRate <= 0 or window <= 0 sets no minimum rate; with neither, body is returned
// unchanged.
func LimitBody(body io.ReadCloser, minRate int64, window, timeout time.Duration, setDeadline func(time.Time) error) io.ReadCloser {
	if (minRate <= 0 || window <= 0) && timeout <= 0 {
		return body
	}
	return newRateBody(body, minRate, window, timeout, setDeadline)
}

func newRateBody(body io.ReadCloser, minRate int64, window, timeout time.Duration, setDeadline func(time.Time) error) *rateBody {
	var need int64
	if minRate > 0 && window > 0 {
		need = max(minRate*int64(window/time.Millisecond)/1000, 1)
	}
	m := &rateBody{body: body, need: need, window: window, setDeadline: setDeadline, now: time.Now}
	if timeout > 0 {
		m.deadline = m.now().Add(timeout)
	}
	return m
}

// ResponseDeadline returns the read-deadline setter of w's connection for
// MinRateBody.
func ResponseDeadline(w http.ResponseWriter) func(time.Time) error {
	return http.NewResponseController(w).SetReadDeadline
}

type rateBody struct {
	body        io.ReadCloser
	need        int64 // bytes each window must bring; 0: no minimum rate
	window      time.Duration
	deadline    time.Time // the whole body must be read by then; zero: no limit
	setDeadline func(time.Time) error
	now         func() time.Time

	mu      sync.Mutex
	got     int64         // bytes in the current window
	waited  time.Duration // time spent in Read in the current window
	cut     bool
	stopped bool
	stopAt  time.Time // after Stop, while what the client already sent is served; zero once done
	closed  bool
}

// After Stop, a Read waits at most stopIdle for the client's bytes, and none is
// served later than stopMax after the Stop.
const (
	stopIdle = 100 * time.Millisecond
	stopMax  = 2 * time.Second
)

func (m *rateBody) Read(p []byte) (int, error) {
	m.mu.Lock()
	if m.stopped {
		return m.readStopping(p)
	}
	if m.cut {
		m.mu.Unlock()
		return 0, ErrTooSlow
	}
	if m.need == 0 && m.deadline.IsZero() { // no minimum, no limit: only Stop ends the body early
		m.mu.Unlock()
		n, err := m.body.Read(p)
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.stopped && err != nil {
			m.stopAt = time.Time{}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = ErrStopped
			}
		}
		return n, err
	}
	start := m.now()
	if !m.deadline.IsZero() && !start.Before(m.deadline) {
		m.cut = true
		m.mu.Unlock()
		return 0, ErrTooSlow
	}
	// This Read may wait until the end of the rate window or the body's deadline,
	// whichever comes first.
	var end time.Time
	if m.need > 0 {
		end = start.Add(m.window - m.waited)
	}
	if !m.deadline.IsZero() && (end.IsZero() || m.deadline.Before(end)) {
		end = m.deadline
	}
	if m.setDeadline != nil && m.setDeadline(end) != nil {
		m.setDeadline = nil // not supported: the timer below instead
	}
	var timer *time.Timer
	if m.setDeadline == nil {
		timer = time.AfterFunc(end.Sub(start), m.expire)
	}
	m.mu.Unlock()

	n, err := m.body.Read(p)

	m.mu.Lock()
	defer m.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	now := m.now()
	m.waited += now.Sub(start)
	m.got += int64(n)
	switch {
	case m.stopped && err != nil: // the Stop's deadline, or the client's end
		m.stopAt = time.Time{}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = ErrStopped
		}
		return n, err
	case m.stopped:
		return n, nil
	case m.cut || (err != nil && errors.Is(err, os.ErrDeadlineExceeded)):
		m.cut = true
		return n, ErrTooSlow
	case m.need == 0:
	case m.got >= m.need:
		m.got, m.waited = 0, 0
	case m.waited >= m.window:
		m.cut = true
		return n, ErrTooSlow
	}
	if err == io.EOF && m.setDeadline != nil {
		_ = m.setDeadline(time.Time{}) // the body is done; the connection goes on without
	}
	return n, err
}

// readStopping is Read after Stop, called with mu held: what the client has already
// sent is still served, a Read waiting at most stopIdle for it (and none after
// stopAt); then ErrStopped for good.
func (m *rateBody) readStopping(p []byte) (int, error) {
	now := m.now()
	if m.stopAt.IsZero() || !now.Before(m.stopAt) || m.setDeadline == nil {
		m.stopAt = time.Time{}
		m.mu.Unlock()
		return 0, ErrStopped
	}
	deadline := now.Add(stopIdle)
	if deadline.After(m.stopAt) {
		deadline = m.stopAt
	}
	if m.setDeadline(deadline) != nil {
		m.stopAt = time.Time{}
		m.mu.Unlock()
		return 0, ErrStopped
	}
	m.mu.Unlock()
	n, err := m.body.Read(p)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.stopAt = time.Time{}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = ErrStopped
		}
	}
	return n, err
}

// expire runs when a Read has waited out the window (timer fallback): closing the
// body makes the blocked Read return.
func (m *rateBody) expire() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.cut = true
	_ = m.body.Close()
}

func (m *rateBody) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return m.body.Close()
}

// Stop ends the reading of body, as returned by MinRateBody, once what the client
// has already sent is read: from then on a Read waits at most 100 ms for bytes (none
// is served 2 s after the Stop), so a Read blocked on a client gone quiet returns at
// once, while the bytes already on their way (in the socket's buffers) are still
// read; then every Read fails with ErrStopped (or the client's own end, io.EOF). The
// connection's read deadline does it; without one, the body is closed at once. The
// server calls it when it must give up a request's body early (a tus PATCH asked to
// hand its upload over). It reports whether body could be stopped.
func Stop(body io.ReadCloser) bool {
	m, ok := body.(*rateBody)
	if !ok {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return true
	}
	m.stopped = true
	now := m.now()
	m.stopAt = now.Add(stopMax)
	// Under mu, so a Read cannot move the deadline back out between the two.
	if m.setDeadline == nil || m.setDeadline(now.Add(stopIdle)) != nil {
		m.setDeadline, m.stopAt = nil, time.Time{}
		if !m.closed {
			go func() { _ = m.body.Close() }() // Close waits for a blocked Read in net/http
		}
	}
	return true
}

// TooSlow reports whether body, as returned by MinRateBody or LimitBody, was cut off
// for being too slow or too long in coming.
func TooSlow(body io.ReadCloser) bool {
	m, ok := body.(*rateBody)
	if !ok {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cut
}
