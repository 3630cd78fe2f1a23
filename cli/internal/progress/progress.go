// Package progress shows how far transfers are: a bar per file with bytes, throughput
// and time left on a terminal (github.com/vbauerster/mpb/v8), plain lines every few
// seconds otherwise, or nothing.
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vbauerster/cupwriter"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/shipfile/shipfile/cli/internal/transfer"
)

// The throughput and the time left are moving averages of samples of sampleEvery (the
// bytes moved in that time): ewmaAge samples weigh, about the last 8 s.
const (
	sampleEvery = 250 * time.Millisecond
	ewmaAge     = 30
)

// Bars draws a progress bar per file on W, a terminal.
type Bars struct {
	W io.Writer
	// now is the clock that times the samples of the throughput and the time left;
	// time.Now when nil.
	now func() time.Time
}

// clock returns now, or time.Now when it is nil.
func clock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}

// Start implements transfer.Progress. The bytes an earlier run moved (done) fill the bar
// but count neither in the throughput nor in the time left: those are this run's.
func (b Bars) Start(name string, total, done int64) transfer.Bar {
	p := mpb.New(mpb.WithConsoleWriter(sized{cupwriter.New(b.W, false)}), mpb.WithAutoRefresh(), mpb.WithRefreshRate(150*time.Millisecond))
	bar := p.New(total, mpb.BarStyle(),
		mpb.PrependDecorators(
			decor.Name(name, decor.WCSyncSpaceR),
			decor.Percentage(decor.WCSyncSpace),
		),
		mpb.AppendDecorators(
			decor.Counters(decor.SizeB1024(0), "% .1f / % .1f", decor.WCSyncSpace),
			decor.EwmaSpeed(decor.SizeB1024(0), "% .1f", ewmaAge, decor.WCSyncSpace),
			decor.OnComplete(decor.EwmaETA(decor.ET_STYLE_GO, ewmaAge, decor.WCSyncSpace), "done"),
		),
	)
	bar.SetCurrent(done)
	now := clock(b.now)
	return &termBar{p: p, bar: bar, total: total, now: now, since: now()}
}

// sized is a console that always has a size: a terminal that reports none (0×0, as some
// consoles and containers do) gets 80×24, where mpb would draw nothing.
type sized struct{ *cupwriter.Writer }

func (s sized) GetTermSize() (int, int, error) {
	w, h, err := s.Writer.GetTermSize()
	if err != nil || w <= 0 || h <= 0 {
		return 80, 24, nil
	}
	return w, h, nil
}

type termBar struct {
	p     *mpb.Progress
	bar   *mpb.Bar
	total int64
	now   func() time.Time

	mu      sync.Mutex
	pending int64     // bytes moved since `since`, not yet on the bar
	since   time.Time // start of the sample being gathered
	ended   bool
}

func (t *termBar) Add(n int) {
	t.mu.Lock()
	t.pending += int64(n)
	now := t.now()
	d := now.Sub(t.since)
	if d < sampleEvery {
		t.mu.Unlock()
		return
	}
	n64 := t.pending
	t.pending, t.since = 0, now
	t.mu.Unlock()
	t.bar.EwmaIncrInt64(n64, d)
}

// Set moves the bar to done without counting the jump in the throughput (a resume
// from the server's offset after a retry).
func (t *termBar) Set(done int64) {
	t.mu.Lock()
	t.pending, t.since = 0, t.now()
	t.mu.Unlock()
	t.bar.SetCurrent(done)
}

func (t *termBar) Finish() {
	if t.end() {
		t.bar.SetCurrent(t.total)
		t.bar.SetTotal(t.total, true)
		t.p.Wait()
	}
}

func (t *termBar) Abort() {
	if t.end() {
		t.bar.Abort(false) // the bar stays where it stopped
		t.p.Wait()
	}
}

// end says whether this is the bar's first end, and puts what is pending on the bar.
func (t *termBar) end() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return false
	}
	t.ended = true
	t.bar.IncrInt64(t.pending)
	t.pending = 0
	return true
}

// Lines writes a plain line per file every Every (and one at the end) on W: for logs and
// pipes, where a bar's redrawing would be noise.
type Lines struct {
	W     io.Writer
	Every time.Duration
	// now is the clock of the lines' times and rates; time.Now when nil.
	now func() time.Time
}

// Start implements transfer.Progress.
func (l Lines) Start(name string, total, done int64) transfer.Bar {
	every := l.Every
	if every <= 0 {
		every = 5 * time.Second
	}
	if done > 0 {
		fmt.Fprintf(l.W, "%s: going on from %s of %s\n", name, Bytes(done), Bytes(total))
	}
	clk := clock(l.now)
	now := clk()
	return &lineBar{w: l.W, name: name, total: total, done: done, start: now, startDone: done, last: now, lastDone: done, every: every, now: clk}
}

type lineBar struct {
	mu          sync.Mutex
	w           io.Writer
	name        string
	total, done int64
	start, last time.Time
	startDone   int64
	every       time.Duration
	now         func() time.Time
	finished    bool
	lastDone    int64
}

func (b *lineBar) Add(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += int64(n)
	if now := b.now(); now.Sub(b.last) >= b.every {
		b.print(now)
	}
}

func (b *lineBar) Set(done int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = done
}

func (b *lineBar) print(now time.Time) {
	rate := float64(b.done-b.lastDone) / now.Sub(b.last).Seconds()
	left := "?"
	if rate > 0 {
		left = time.Duration(float64(b.total-b.done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	pct := 100.0
	if b.total > 0 {
		pct = float64(b.done) * 100 / float64(b.total)
	}
	fmt.Fprintf(b.w, "%s: %s of %s (%.0f%%), %s/s, %s left\n", b.name, Bytes(b.done), Bytes(b.total), pct, Bytes(int64(rate)), left)
	b.last, b.lastDone = now, b.done
}

func (b *lineBar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.finished = true
	d := b.now().Sub(b.start)
	rate := float64(b.done-b.startDone) / max(d.Seconds(), 1e-3)
	fmt.Fprintf(b.w, "%s: %s done in %s (%s/s)\n", b.name, Bytes(b.total), d.Round(100*time.Millisecond), Bytes(int64(rate)))
}

func (b *lineBar) Abort() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.finished {
		b.finished = true
		fmt.Fprintf(b.w, "%s: stopped at %s of %s\n", b.name, Bytes(b.done), Bytes(b.total))
	}
}

// None shows nothing.
type None struct{}

// Start implements transfer.Progress.
func (None) Start(string, int64, int64) transfer.Bar { return noBar{} }

type noBar struct{}

func (noBar) Add(int)   {}
func (noBar) Set(int64) {}
func (noBar) Finish()   {}
func (noBar) Abort()    {}

// Bytes writes n bytes for people: 512 B, 1.5 KiB, 200.0 MiB.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
