//go:build !unix

package store

// allocPart allocates a part buffer on the Go heap where mmap is not available.
func allocPart(size int) ([]byte, error) { return make([]byte, size), nil }

// freePart leaves the buffer to the garbage collector.
func freePart([]byte) {}

// releasePart cannot give back the pages of a buffer on the Go heap.
func releasePart([]byte) {}
