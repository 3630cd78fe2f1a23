// Package progress shows how far transfers are: a bar per file with bytes, throughput
// and time left on a terminal (github.com/schollz/progressbar/v3), plain lines every few
// seconds otherwise, or nothing.
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/shipfile/shipfile/cli/internal/transfer"
)

// Bars draws a progress bar per file on w, a terminal.
type Bars struct{ W io.Writer }

// Start implements transfer.Progress.
func (b Bars) Start(name string, total, done int64) transfer.Bar {
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(b.W),
		progressbar.OptionSetDescription(name),
		progressbar.OptionShowBytes(true),
		progressbar.OptionUseIECUnits(true), // MiB, as the plain lines and the summaries
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionFullWidth(),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.W) }),
		progressbar.OptionSetRenderBlankState(true),
	)
	_ = bar.Set64(done)
	return &termBar{bar: bar, w: b.W}
}

type termBar struct {
	bar *progressbar.ProgressBar
	w   io.Writer
}

func (t *termBar) Add(n int)      { _ = t.bar.Add(n) }
func (t *termBar) Set(done int64) { _ = t.bar.Set64(done) }
func (t *termBar) Finish()        { _ = t.bar.Finish() }
func (t *termBar) Abort() {
	_ = t.bar.Exit()
	fmt.Fprintln(t.w)
}

// Lines writes a plain line per file every Every (and one at the end) on W: for logs and
// pipes, where a bar's redrawing would be noise.
type Lines struct {
	W     io.Writer
	Every time.Duration
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
	now := time.Now()
	return &lineBar{w: l.W, name: name, total: total, done: done, start: now, startDone: done, last: now, lastDone: done, every: every}
}

type lineBar struct {
	mu          sync.Mutex
	w           io.Writer
	name        string
	total, done int64
	start, last time.Time
	startDone   int64
	every       time.Duration
	finished    bool
	lastDone    int64
}

func (b *lineBar) Add(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += int64(n)
	if now := time.Now(); now.Sub(b.last) >= b.every {
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
	d := time.Since(b.start)
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
