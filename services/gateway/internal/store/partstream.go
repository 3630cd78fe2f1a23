package store

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"sync"

	"github.com/minio/minio-go/v7"
)

// errShortPart ends a streamed part's request when the upload ends before the part is
// full: the request promised a whole part, so it must fail, and the shorter last part
// is sent again from the buffer.
var errShortPart = errors.New("the upload ended inside the part")

// errDetached answers a read of a streamed part's body after its request is over.
var errDetached = errors.New("part stream detached")

// checksumTrailer is the trailer carrying a streamed part's CRC32C, which the store
// checks against the bytes it received.
const checksumTrailer = "X-Amz-Checksum-Crc32c"

// partStream is the body of a part sent while it is read from the upload: each Read
// reads the next bytes of the upload into the part buffer and hands the same bytes on,
// so the client's sending and the store's receiving overlap instead of taking turns
// (read a whole part, then send it). The buffer keeps what was read, for a second try
// from memory when the request fails or the part turns out to be the last, shorter one.
// The part's CRC32C, known only at its end, goes in the request's trailer.
//
// The request's transport may still read the body after the request returned; the
// mutex and detach keep every byte taken from the upload in the buffer, in order.
type partStream struct {
	mu       sync.Mutex
	src      io.Reader
	buf      []byte // the part; buf[:n] is read
	n        int
	sent     int // buf[:sent] is handed to the request
	crc      uint32
	trailer  http.Header
	srcErr   error // the upload's error, io.EOF when it ended
	detached bool
}

func newPartStream(src io.Reader, buf []byte) *partStream {
	// The trailer's placeholder has the length of its final value: the request's
	// length is computed from it before the body is read.
	return &partStream{src: src, buf: buf, trailer: http.Header{checksumTrailer: {crc32cBase64(0)}}}
}

func (s *partStream) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detached {
		return 0, errDetached
	}
	if s.sent == s.n {
		switch {
		case s.n == len(s.buf):
			return 0, io.EOF
		case s.srcErr != nil:
			return 0, s.errLocked()
		}
		s.fillLocked(len(p))
	}
	k := copy(p, s.buf[s.sent:s.n])
	s.sent += k
	switch {
	case s.sent < s.n:
		return k, nil
	case s.n == len(s.buf):
		s.trailer.Set(checksumTrailer, crc32cBase64(s.crc))
		return k, io.EOF
	case s.srcErr != nil:
		return k, s.errLocked()
	}
	return k, nil
}

// fillLocked reads at most max more bytes of the upload into the part.
func (s *partStream) fillLocked(max int) {
	end := s.n + min(max, len(s.buf)-s.n)
	k, err := s.src.Read(s.buf[s.n:end])
	s.crc = crc32.Update(s.crc, crc32cTable, s.buf[s.n:s.n+k])
	s.n += k
	if err != nil {
		s.srcErr = err
	}
}

// errLocked is the error a read gives once the upload failed or ended short.
func (s *partStream) errLocked() error {
	if errors.Is(s.srcErr, io.EOF) {
		return errShortPart
	}
	return s.srcErr
}

// detach ends the request's hold on the stream and returns how much of the part was
// read and the upload's error (io.EOF once it ended), if any.
func (s *partStream) detach() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.detached = true
	return s.n, s.srcErr
}

// putStreamedPart sends part number of an upload from r, read and sent together
// through buf. It returns the part, its size and whether the upload ended with it. A
// part that comes out shorter than buf (the last) is sent again from buf; so is one
// whose streamed request fails, after the rest of it is read (streamPart).
func (o *Objects) putStreamedPart(ctx context.Context, key, uploadID string, number int, r io.Reader, buf []byte) (minio.ObjectPart, int, bool, error) {
	part, stored, n, srcErr, err := o.streamPart(ctx, key, uploadID, number, r, buf, 0)
	switch {
	case err != nil:
		return minio.ObjectPart{}, 0, false, err
	case srcErr != nil && !errors.Is(srcErr, io.EOF):
		return minio.ObjectPart{}, 0, false, srcErr // the upload failed: nothing more to send
	case stored:
		return part, n, srcErr != nil, nil
	case n == 0:
		return minio.ObjectPart{}, 0, true, nil // the upload ended at a part's boundary
	}
	// The last part, shorter: from memory.
	part, err = o.putBufferedPart(ctx, key, uploadID, number, buf[:n])
	return part, n, true, err
}

// streamPart sends part number of len(buf) bytes, the first filled of which are in buf
// already, while it reads the rest from r into buf. Every byte taken from r is kept in
// buf[:n], in order. stored says the part was full and is stored; srcErr is r's error
// (io.EOF when it ended), which comes without a stored part when r ended or failed
// inside it (the part's request is then abandoned, and the store keeps nothing of it),
// and may come with one when r ended with the part's last bytes. When the store fails
// the streamed request, the rest of the part is read and sent again from buf.
func (o *Objects) streamPart(ctx context.Context, key, uploadID string, number int, r io.Reader, buf []byte, filled int) (part minio.ObjectPart, stored bool, n int, srcErr, err error) {
	ps := newPartStream(r, buf)
	ps.n, ps.crc = filled, crc32.Update(0, crc32cTable, buf[:filled])
	// The first bytes before the request (no request reads the stream yet): a body that
	// ends at once, or within them, sends no doomed request.
	for ps.n == 0 && ps.srcErr == nil {
		ps.fillLocked(len(buf))
	}
	if ps.srcErr != nil {
		return minio.ObjectPart{}, false, ps.n, ps.srcErr, nil
	}
	part, err = o.core.PutObjectPart(ctx, o.s.Bucket, key, uploadID, number, ps, int64(len(buf)),
		minio.PutObjectPartOptions{Trailer: ps.trailer, DisableContentSha256: true})
	n, srcErr = ps.detach()
	switch {
	case err == nil: // the whole part (r may have ended with its last bytes)
		return part, true, n, srcErr, nil
	case srcErr != nil:
		return minio.ObjectPart{}, false, n, srcErr, nil
	case ctx.Err() != nil:
		return minio.ObjectPart{}, false, n, nil, ctx.Err()
	}
	// The store failed the request: the rest of the part, then the part from memory.
	k, rerr := io.ReadFull(r, buf[n:])
	n += k
	if rerr != nil {
		if errors.Is(rerr, io.ErrUnexpectedEOF) {
			rerr = io.EOF
		}
		return minio.ObjectPart{}, false, n, rerr, nil
	}
	part, err = o.putBufferedPart(ctx, key, uploadID, number, buf)
	return part, err == nil, n, nil, err
}

func crc32cBase64(sum uint32) string {
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, sum))
}
