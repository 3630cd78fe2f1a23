package store

import "sync"

// maxIdleParts is how many part buffers stay mapped between uploads, their pages given
// back to the system (releasePart), so an idle gateway holds no memory for them; the
// rest of a burst's buffers are unmapped when their uploads end.
const maxIdleParts = 4

// partBuffers hands out the part buffers of uploads. They live outside the Go heap
// (allocPart), so that megabytes of long-lived, pointer-free buffers do not raise the
// garbage collector's heap goal: with them on the heap, every other allocation could
// grow to as much again before a collection, and the process's memory with it.
type partBuffers struct {
	size int

	mu   sync.Mutex
	idle [][]byte
}

// get returns a buffer of the part size.
func (p *partBuffers) get() ([]byte, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		b := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return b, nil
	}
	p.mu.Unlock()
	return allocPart(p.size)
}

// put gives a buffer back once its upload no longer uses it.
func (p *partBuffers) put(b []byte) {
	releasePart(b)
	p.mu.Lock()
	if len(p.idle) < maxIdleParts {
		p.idle = append(p.idle, b)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	freePart(b)
}
