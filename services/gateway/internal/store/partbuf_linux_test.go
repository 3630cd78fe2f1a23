package store

import (
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// resident counts the pages of b that are in memory.
func resident(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// An idle part buffer stays mapped for the next upload but, once idle for
// releaseAfter, holds no memory: a gateway after a burst of uploads does not keep
// maxIdleParts parts' worth of pages.
func TestIdlePartsHoldNoMemory(t *testing.T) {
	const size = 1 << 20
	pages := size / os.Getpagesize()
	p := &partBuffers{size: size, releaseAfter: 10 * time.Millisecond}
	b, err := p.get()
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 1
	}
	if got := resident(t, b); got != pages {
		t.Fatalf("a filled part: %d of %d pages resident", got, pages)
	}
	p.put(b)
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		got := resident(t, b)
		p.mu.Unlock()
		if got == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("an idle part: %d of %d pages resident after 10 s, want none", got, pages)
		}
		time.Sleep(10 * time.Millisecond)
	}
	again, err := p.get()
	if err != nil {
		t.Fatal(err)
	}
	if &again[0] != &b[0] {
		t.Fatal("the idle buffer was not handed out again")
	}
	if again[0] != 0 || again[size-1] != 0 {
		t.Fatal("a reused part kept its old bytes")
	}
	again[size/2] = 2
	p.put(again)
}

// A part buffer taken again before releaseAfter (the next PATCH of an upload) keeps
// its pages: nothing is faulted in and zeroed anew.
func TestPartTakenAgainKeepsItsPages(t *testing.T) {
	const size = 1 << 20
	pages := size / os.Getpagesize()
	p := &partBuffers{size: size, releaseAfter: time.Hour}
	b, err := p.get()
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 1
	}
	p.put(b)
	again, err := p.get()
	if err != nil {
		t.Fatal(err)
	}
	if &again[0] != &b[0] {
		t.Fatal("the idle buffer was not handed out again")
	}
	if got := resident(t, again); got != pages {
		t.Fatalf("a part taken again at once: %d of %d pages resident, want all", got, pages)
	}
	p.put(again)
}

// A buffer taken again while a release of idle buffers is pending keeps what its
// upload writes: only buffers still idle are released.
func TestTakenPartKeepsItsBytes(t *testing.T) {
	const size = 1 << 20
	p := &partBuffers{size: size, releaseAfter: time.Nanosecond}
	b, err := p.get()
	if err != nil {
		t.Fatal(err)
	}
	p.put(b)
	b, err = p.get()
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 7
	}
	// The release put started has run (or finds no idle buffer), and one more runs.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		pending := p.releasing != nil
		p.mu.Unlock()
		if !pending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the release of idle buffers still pending after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	p.releaseIdle()
	for i := 0; i < size; i += os.Getpagesize() {
		if b[i] != 7 {
			t.Fatalf("byte %d of a part in use is %d, want 7", i, b[i])
		}
	}
	p.put(b)
}
