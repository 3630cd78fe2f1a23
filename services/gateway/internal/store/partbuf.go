package store

import (
	"sync"
	"time"
)

// maxIdleParts is how many part buffers stay mapped between uploads; the rest of a
// burst's buffers are unmapped when their uploads end.
const maxIdleParts = 4

// idleRelease is how long a part buffer given back keeps its pages before they go back
// to the system (releasePart), so an idle gateway holds no memory for them: an upload
// sent as a series of PATCHes takes its buffer again within it, with no page faulted in
// and zeroed anew (for a part of 16 MiB, about as much CPU as copying it five times).
const idleRelease = time.Second

// partBuffers hands out the part buffers of uploads. They live outside the Go heap
// (allocPart), so that megabytes of long-lived, pointer-free buffers do not raise the
// garbage collector's heap goal: with them on the heap, every other allocation could
// grow to as much again before a collection, and the process's memory with it.
type partBuffers struct {
	size int
	// releaseAfter is how long an idle buffer keeps its pages (0: idleRelease).
	releaseAfter time.Duration

	mu   sync.Mutex
	idle []idlePart // the last given back last
	// releasing is the pending release of idle buffers' pages; nil when none is.
	releasing *time.Timer
}

// idlePart is an idle buffer and when it was given back; at is zero once its pages are
// released.
type idlePart struct {
	b  []byte
	at time.Time
}

// get returns a buffer of the part size: the idle one given back last (whose pages are
// the likeliest to be in memory still), else a new one.
func (p *partBuffers) get() ([]byte, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		b := p.idle[n-1].b
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return b, nil
	}
	p.mu.Unlock()
	return allocPart(p.size)
}

// put gives a buffer back once its upload no longer uses it. Its pages go back to the
// system once it has been idle for releaseAfter.
func (p *partBuffers) put(b []byte) {
	p.mu.Lock()
	if len(p.idle) >= maxIdleParts {
		p.mu.Unlock()
		freePart(b)
		return
	}
	p.idle = append(p.idle, idlePart{b: b, at: time.Now()})
	if p.releasing == nil {
		p.releasing = time.AfterFunc(p.after(), p.releaseIdle)
	}
	p.mu.Unlock()
}

// releaseIdle gives back the pages of the buffers idle for releaseAfter, and comes back
// for the others. The pages are released under the lock: a buffer taken meanwhile
// would lose what its upload wrote.
func (p *partBuffers) releaseIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releasing = nil
	after, now := p.after(), time.Now()
	var next time.Duration
	for i := range p.idle {
		e := &p.idle[i]
		if e.at.IsZero() {
			continue
		}
		if age := now.Sub(e.at); age < after {
			if wait := after - age; next == 0 || wait < next {
				next = wait
			}
			continue
		}
		releasePart(e.b)
		e.at = time.Time{}
	}
	if next > 0 {
		p.releasing = time.AfterFunc(next, p.releaseIdle)
	}
}

func (p *partBuffers) after() time.Duration {
	if p.releaseAfter > 0 {
		return p.releaseAfter
	}
	return idleRelease
}
