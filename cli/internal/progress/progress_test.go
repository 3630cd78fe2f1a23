package progress

import (
	"bytes"
	"strings"
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
