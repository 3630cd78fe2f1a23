package progress

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 200 << 20: "200.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestLines: a line when the transfer goes on from an earlier run's bytes, one every
// Every with bytes of size, percentage, this run's throughput and time left, and one at
// the end, on the lines' own clock.
func TestLines(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	clk := newFakeClock()
	bar := Lines{W: &buf, Every: time.Second, now: clk.Now}.Start("big.bin", 100<<20, 40<<20)
	clk.Advance(500 * time.Millisecond)
	bar.Add(5 << 20) // half a second: no line yet
	clk.Advance(500 * time.Millisecond)
	bar.Add(5 << 20)
	clk.Advance(4 * time.Second)
	bar.Finish()
	bar.Finish() // once only
	want := "big.bin: going on from 40.0 MiB of 100.0 MiB\n" +
		"big.bin: 50.0 MiB of 100.0 MiB (50%), 10.0 MiB/s, 5s left\n" +
		"big.bin: 100.0 MiB done in 5s (2.0 MiB/s)\n"
	if got := buf.String(); got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
}

// TestBars: the bar on a terminal shows the file's name, the bytes moved of its size, the
// throughput and the time left, redrawn in place. A resumed transfer's earlier bytes fill
// the bar but do not count in the throughput: 40 MiB there already and 10 MiB moved in a
// second is 10 MiB/s, not 50. The bar's clock is the test's, so the throughput and the
// time left are known exactly, however the machine schedules the test.
func TestBars(t *testing.T) {
	var buf syncBuffer
	clk := newFakeClock()
	bar := Bars{W: &buf, now: clk.Now}.Start("big.bin", 100<<20, 40<<20)
	for range 20 {
		clk.Advance(50 * time.Millisecond)
		bar.Add(512 << 10)
	}
	last := waitForLine(t, &buf, "50.0 MiB / 100.0 MiB", 20*time.Second)
	bar.Finish()
	m := regexp.MustCompile(`big\.bin.* 50 %.*50\.0 MiB / 100\.0 MiB +([0-9.]+) MiB/s +(\S+)`).FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("the bar does not show name, percentage, bytes of size, throughput and time left: %q", last)
	}
	if m[1] != "10.0" {
		t.Errorf("the bar shows %s MiB/s for 10 MiB moved in this run's second: %q", m[1], last)
	}
	// 50 MiB left at 10 MiB/s is 5 s, less mpb's rounding: whole nanoseconds per byte
	// (95 for 95.4), whole seconds shown.
	if eta, err := time.ParseDuration(m[2]); err != nil || eta < 4*time.Second || eta > 5*time.Second {
		t.Errorf("the bar shows %s left for 50 MiB at 10 MiB/s: %q", m[2], last)
	}
	if !strings.Contains(buf.String(), "done") {
		t.Errorf("the finished bar does not say done: %q", buf.String())
	}
}

// waitForLine waits up to limit for the bar's redraw to hold want and returns the line
// that holds it (the test fails when none comes): mpb redraws on its own timer.
func waitForLine(t *testing.T, buf *syncBuffer, want string, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		out := buf.String()
		lines := strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' })
		for i := len(lines) - 1; i >= 0; i-- {
			if strings.Contains(lines[i], want) {
				return lines[i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no redraw shows %q within %s: %q", want, limit, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fakeClock is a clock that moves only when the test says.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// Now is the clock's time.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// syncBuffer is a bytes.Buffer that the bar's goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
