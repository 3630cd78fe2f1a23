package store

import (
	"os"
	"syscall"
	"testing"
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

// An idle part buffer stays mapped for the next upload but holds no memory: a gateway
// after a burst of uploads does not keep maxIdleParts parts' worth of pages.
func TestIdlePartsHoldNoMemory(t *testing.T) {
	const size = 1 << 20
	pages := size / os.Getpagesize()
	p := &partBuffers{size: size}
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
	if got := resident(t, b); got != 0 {
		t.Fatalf("an idle part: %d of %d pages resident, want none", got, pages)
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
