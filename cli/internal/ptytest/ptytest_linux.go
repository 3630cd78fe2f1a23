// Package ptytest opens pseudo-terminals for tests: what a command's standard error is
// when it runs in a terminal.
package ptytest

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// Open opens a pseudo-terminal of cols×rows (0×0: a terminal that reports no size, as
// some consoles and containers do) and returns its terminal side and its controlling
// side; the test is skipped where there is none.
func Open(t testing.TB, cols, rows int) (tty, ctl *os.File) {
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
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)}); err != nil {
		t.Fatalf("set the terminal's size: %v", err)
	}
	return tty, ctl
}
