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

// MinRateBody wraps a request body so that it must bring at least minRate bytes a
// second, counted over windows of window: each window must bring minRate×window
// bytes, and the next starts once it has. A body that falls behind (a client that
// sends one part and stalls, or trickles a byte at a time) fails with ErrTooSlow
// within one window of falling behind, even while a Read is blocked: the
// connection's read deadline (set through setDeadline, usually
// http.ResponseController.SetReadDeadline) is moved to the end of the current
// window, and when the deadline cannot be set a timer closes the body instead.
//
// It is one wrapper for every upload route (multipart uploads and tus PATCH).
// minRate <= 0 or window <= 0 returns body unchanged.
func MinRateBody(body io.ReadCloser, minRate int64, window time.Duration, setDeadline func(time.Time) error) io.ReadCloser {
	if minRate <= 0 || window <= 0 {
		return body
	}
	m := &rateBody{body: body, need: minRate * int64(window/time.Millisecond) / 1000, window: window, setDeadline: setDeadline, now: time.Now}
	if m.need < 1 {
		m.need = 1
	}
	m.startWindow(m.now())
	return m
}

// ResponseDeadline returns the read-deadline setter of w's connection for
// MinRateBody, or nil when w cannot set one.
func ResponseDeadline(w http.ResponseWriter) func(time.Time) error {
	rc := http.NewResponseController(w)
	return rc.SetReadDeadline
}

type rateBody struct {
	body        io.ReadCloser
	need        int64
	window      time.Duration
	setDeadline func(time.Time) error
	now         func() time.Time

	mu     sync.Mutex
	got    int64 // bytes in the current window
	end    time.Time
	timer  *time.Timer
	cut    bool
	closed bool
}

// startWindow begins a window at now: the body must bring need bytes by its end.
func (m *rateBody) startWindow(now time.Time) {
	m.got = 0
	m.end = now.Add(m.window)
	if m.setDeadline != nil && m.timer == nil {
		if err := m.setDeadline(m.end); err == nil {
			return
		}
		m.setDeadline = nil // not supported: fall back to the timer
	}
	if m.timer == nil {
		m.timer = time.AfterFunc(m.window, m.expire)
		return
	}
	m.timer.Reset(m.window)
}

// expire runs when a window ends without its bytes (timer fallback): closing the
// body makes a blocked Read return.
func (m *rateBody) expire() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.got >= m.need {
		return
	}
	m.cut = true
	_ = m.body.Close()
}

func (m *rateBody) Read(p []byte) (int, error) {
	n, err := m.body.Read(p)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.got += int64(n)
	if m.cut || (err != nil && errors.Is(err, os.ErrDeadlineExceeded)) {
		m.cut = true
		return n, ErrTooSlow
	}
	if err == nil && !now.Before(m.end) && m.got < m.need {
		// Bytes arrived, but too few for the window that has just ended.
		m.cut = true
		return n, ErrTooSlow
	}
	if m.got >= m.need {
		m.startWindow(now)
	}
	if err == io.EOF && m.setDeadline != nil {
		_ = m.setDeadline(time.Time{}) // the body is done; the next request starts fresh
	}
	return n, err
}

func (m *rateBody) Close() error {
	m.mu.Lock()
	m.closed = true
	if m.timer != nil {
		m.timer.Stop()
	}
	m.mu.Unlock()
	return m.body.Close()
}

// TooSlow reports whether body, as returned by MinRateBody, was cut off for being
// too slow.
func TooSlow(body io.ReadCloser) bool {
	m, ok := body.(*rateBody)
	if !ok {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cut
}
