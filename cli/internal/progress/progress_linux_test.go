package progress

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/cli/internal/ptytest"
)

// TestBarsOnATerminal: on a terminal the bar is drawn, and redrawn in place (cursor up,
// erase), also on one that reports no size (0×0: some consoles and containers), where it
// takes 80 columns.
func TestBarsOnATerminal(t *testing.T) {
	for _, size := range [][2]int{{100, 40}, {0, 0}} {
		tty, ctl := ptytest.Open(t, size[0], size[1])
		var got bytes.Buffer
		read := make(chan struct{})
		go func() {
			defer close(read)
			_, _ = io.Copy(&got, ctl) // ends when the terminal side is closed
		}()
		bar := Bars{W: tty}.Start("big.bin", 10<<20, 0)
		for range 8 {
			time.Sleep(100 * time.Millisecond)
			bar.Add(1 << 20)
		}
		bar.Finish()
		tty.Close()
		select {
		case <-read:
		case <-time.After(5 * time.Second):
			ctl.Close()
			<-read
		}
		out := got.String()
		if !strings.Contains(out, "big.bin") || !strings.Contains(out, "10.0 MiB / 10.0 MiB") || !strings.Contains(out, "\x1b[1A") {
			t.Errorf("a terminal of %dx%d: the bar is not drawn and redrawn: %q", size[0], size[1], out)
		}
		for _, line := range strings.Split(out, "\n") {
			if n := len([]rune(strings.TrimRight(strings.TrimPrefix(line, "\x1b[1A\x1b[J"), "\r"))); size[0] == 0 && n > 80 {
				t.Errorf("a terminal of no size: a line of %d columns: %q", n, line)
			}
		}
	}
}
