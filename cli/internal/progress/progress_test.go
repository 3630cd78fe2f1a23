package progress

import (
	"bytes"
	"regexp"
	"strconv"
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

func TestLines(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	bar := Lines{W: &buf, Every: time.Nanosecond}.Start("big.bin", 100<<20, 40<<20)
	bar.Add(10 << 20)
	bar.Finish()
	bar.Finish() // once only
	out := buf.String()
	for _, want := range []string{"big.bin: going on from 40.0 MiB of 100.0 MiB\n", "big.bin: 50.0 MiB of 100.0 MiB (50%)", "big.bin: 100.0 MiB done in"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "done in") != 1 {
		t.Errorf("Finish printed twice:\n%s", out)
	}
	if strings.Contains(out, "\r") || strings.Contains(out, "\x1b") {
		t.Errorf("plain lines hold terminal controls: %q", out)
	}
}

// TestBars: the bar on a terminal shows the file's name, the bytes moved of its size, the
// throughput and the time left, redrawn in place. A resumed transfer's earlier bytes fill
// the bar but do not count in the throughput: 40 MiB there already and 10 MiB moved in
// about a second is about 10 MiB/s, not 50.
func TestBars(t *testing.T) {
	var buf syncBuffer
	bar := Bars{W: &buf}.Start("big.bin", 100<<20, 40<<20)
	start := time.Now()
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		bar.Add(512 << 10)
	}
	rate := float64(10<<20) / time.Since(start).Seconds() / (1 << 20)
	time.Sleep(300 * time.Millisecond) // a redraw
	out := buf.String()
	bar.Finish()
	// The last full redraw before Finish.
	lines := strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' })
	var last string
	for _, l := range lines {
		if strings.Contains(l, "big.bin") {
			last = l
		}
	}
	m := regexp.MustCompile(`big\.bin.* 50 %.*50\.0 MiB / 100\.0 MiB +([0-9.]+) MiB/s +([0-9]+)s`).FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("the bar does not show name, percentage, bytes of size, throughput and time left: %q", last)
	}
	shown, _ := strconv.ParseFloat(m[1], 64)
	if shown > 2*rate || shown < rate/2 {
		t.Errorf("the bar shows %.1f MiB/s for about %.1f MiB/s moved in this run: %q", shown, rate, last)
	}
	if !strings.Contains(buf.String(), "done") {
		t.Errorf("the finished bar does not say done: %q", buf.String())
	}
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
