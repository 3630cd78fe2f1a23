package commands

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shipfile/shipfile/cli/internal/progress"
)

// openPTY opens a pseudo-terminal and returns its terminal side (what a shell gives a
// command as standard error) and its controlling side.
func openPTY(t *testing.T) (tty, ctl *os.File) {
	t.Helper()
	ctl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { ctl.Close() })
	fd := int(ctl.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the terminal side: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return tty, ctl
}

// TestProgressKind: bars when standard error is a terminal (also under --json, whose
// document goes to standard output), plain lines when it is not, nothing under --quiet or
// under --json off a terminal.
func TestProgressKind(t *testing.T) {
	tty, _ := openPTY(t)
	file, err := os.Create(filepath.Join(t.TempDir(), "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var buf bytes.Buffer
	for _, tc := range []struct {
		name        string
		err         any
		json, quiet bool
		want        any
	}{
		{"terminal", tty, false, false, progress.Bars{}},
		{"terminal, --json", tty, true, false, progress.Bars{}},
		{"terminal, --quiet", tty, false, true, progress.None{}},
		{"file", file, false, false, progress.Lines{}},
		{"pipe", &buf, false, false, progress.Lines{}},
		{"file, --json", file, true, false, progress.None{}},
		{"file, --quiet", file, false, true, progress.None{}},
	} {
		w, _ := tc.err.(interface{ Write([]byte) (int, error) })
		a := &app{io: IO{Err: w}, json: tc.json, quiet: tc.quiet}
		got := a.progress()
		var ok bool
		switch tc.want.(type) {
		case progress.Bars:
			_, ok = got.(progress.Bars)
		case progress.Lines:
			_, ok = got.(progress.Lines)
		case progress.None:
			_, ok = got.(progress.None)
		}
		if !ok {
			t.Errorf("%s: progress is %T, want %T", tc.name, got, tc.want)
		}
	}
}
