//go:build unix

package store

import (
	"fmt"
	"syscall"
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
