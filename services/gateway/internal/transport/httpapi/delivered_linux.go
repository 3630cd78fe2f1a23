//go:build linux

package httpapi

import (
	"net"

	"golang.org/x/sys/unix"
)

// dupConn duplicates the descriptor of c.
func dupConn(c *net.TCPConn) (int, bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	fd, derr := -1, error(nil)
	if err := raw.Control(func(f uintptr) { fd, derr = unix.Dup(int(f)) }); err != nil || derr != nil {
		return 0, false
	}
	unix.CloseOnExec(fd)
	return fd, true
}

func closeFD(fd int) { _ = unix.Close(fd) }

// bytesAcked is how many bytes the peer of the socket fd has acknowledged
// (tcpi_bytes_acked), and whether it may still acknowledge more (the connection is
// not closed or reset).
func bytesAcked(fd int) (int64, bool, bool) {
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0, false, false
	}
	const established, finWait1, closeWait, lastAck, closing = 1, 4, 8, 9, 11
	switch info.State {
	case established, finWait1, closeWait, lastAck, closing:
		return int64(info.Bytes_acked), true, true
	}
	return int64(info.Bytes_acked), false, true
}

// bytesWritten is how many bytes were written to the socket fd: those acknowledged
// and those still in its send queue (SIOCOUTQ: unacknowledged or not sent yet).
func bytesWritten(fd int) (int64, bool) {
	acked, _, ok := bytesAcked(fd)
	if !ok {
		return 0, false
	}
	queued, err := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
	if err != nil {
		return 0, false
	}
	return acked + int64(queued), true
}
