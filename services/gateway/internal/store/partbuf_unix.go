//go:build unix

package store

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// allocPart maps size bytes of anonymous memory, outside the Go heap.
func allocPart(size int) ([]byte, error) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("part buffer: mmap %d bytes: %w", size, err)
	}
	return b, nil
}

// freePart unmaps a buffer of allocPart.
func freePart(b []byte) { _ = syscall.Munmap(b) }

// releasePart gives an idle buffer's pages back to the system, keeping the mapping:
// the next upload that takes the buffer gets zeroed pages as it touches them.
func releasePart(b []byte) { _ = unix.Madvise(b, unix.MADV_DONTNEED) }
