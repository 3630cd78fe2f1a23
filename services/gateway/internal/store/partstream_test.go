package store

import (
	"bytes"
	"crypto/rand"
	"errors"
	"hash/crc32"
	"io"
	"testing"
)

// oddReader hands out at most 7,777 bytes per read, as a network body does.
type oddReader struct{ r io.Reader }

func (o oddReader) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 7777)]) }

// TestPartStreamFullPart: a full part comes through the stream byte for byte, ends with
// io.EOF, and its trailer holds the CRC32C of exactly those bytes; the rest of the upload
// stays unread.
func TestPartStreamFullPart(t *testing.T) {
	data := make([]byte, 3000)
	_, _ = rand.Read(data)
	src := bytes.NewReader(data)
	buf := make([]byte, 1000)
	ps := newPartStream(oddReader{src}, buf)
	got, err := io.ReadAll(ps)
	if err != nil || !bytes.Equal(got, data[:1000]) {
		t.Fatalf("read %d bytes (%v), want the part's 1000", len(got), err)
	}
	if want := crc32cBase64(crc32.Checksum(data[:1000], crc32cTable)); ps.trailer.Get(checksumTrailer) != want {
		t.Fatalf("trailer %q, want %q", ps.trailer.Get(checksumTrailer), want)
	}
	if n, err := ps.detach(); n != 1000 || err != nil {
		t.Fatalf("detach = %d, %v", n, err)
	}
	if src.Len() != 2000 {
		t.Fatalf("%d bytes of the upload left, want 2000: the stream read past its part", src.Len())
	}
}

// TestPartStreamShortPart: an upload that ends inside the part fails the request (which
// promised a whole part) and keeps every byte read in the buffer.
func TestPartStreamShortPart(t *testing.T) {
	data := make([]byte, 600)
	_, _ = rand.Read(data)
	buf := make([]byte, 1000)
	ps := newPartStream(oddReader{bytes.NewReader(data)}, buf)
	got, err := io.ReadAll(ps)
	if !errors.Is(err, errShortPart) {
		t.Fatalf("read error %v, want %v", err, errShortPart)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, want the 600 sent", len(got))
	}
	n, srcErr := ps.detach()
	if n != 600 || !errors.Is(srcErr, io.EOF) || !bytes.Equal(buf[:n], data) {
		t.Fatalf("detach = %d, %v; the buffer must hold the 600 bytes", n, srcErr)
	}
}

// TestPartStreamUploadFails: the upload's own error ends the request and comes back.
func TestPartStreamUploadFails(t *testing.T) {
	boom := errors.New("client went away")
	ps := newPartStream(io.MultiReader(bytes.NewReader(make([]byte, 300)), errReader{boom}), make([]byte, 1000))
	if _, err := io.ReadAll(ps); !errors.Is(err, boom) {
		t.Fatalf("read error %v, want %v", err, boom)
	}
	if _, err := ps.detach(); !errors.Is(err, boom) {
		t.Fatalf("detach error %v, want %v", err, boom)
	}
}

// TestPartStreamDetached: once the request is over, a late read of the transport gets
// nothing and takes nothing from the upload, so the rest of the part can be read into
// the buffer where it left off.
func TestPartStreamDetached(t *testing.T) {
	src := bytes.NewReader(make([]byte, 3000))
	ps := newPartStream(src, make([]byte, 1000))
	p := make([]byte, 100)
	if n, err := ps.Read(p); n != 100 || err != nil {
		t.Fatalf("read = %d, %v", n, err)
	}
	if n, err := ps.detach(); n != 100 || err != nil {
		t.Fatalf("detach = %d, %v", n, err)
	}
	if n, err := ps.Read(p); n != 0 || !errors.Is(err, errDetached) {
		t.Fatalf("read after detach = %d, %v; want 0, %v", n, err, errDetached)
	}
	if src.Len() != 2900 {
		t.Fatalf("%d bytes of the upload left, want 2900", src.Len())
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
