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
// part that comes out shorter than buf (the last), or whose streamed request fails,
// is read to its end and sent again from buf, with minio-go's retries.
func (o *Objects) putStreamedPart(ctx context.Context, key, uploadID string, number int, r io.Reader, buf []byte) (minio.ObjectPart, int, bool, error) {
	ps := newPartStream(r, buf)
	// The first bytes before the request (no request reads the stream yet): an upload
	// that ended at a part's boundary sends nothing more.
	for ps.n == 0 && ps.srcErr == nil {
		ps.fillLocked(len(buf))
	}
	if ps.n == 0 {
		return minio.ObjectPart{}, 0, true, ignoreEOF(ps.srcErr)
	}
	part, err := o.core.PutObjectPart(ctx, o.s.Bucket, key, uploadID, number, ps, int64(len(buf)),
		minio.PutObjectPartOptions{Trailer: ps.trailer, DisableContentSha256: true})
	n, srcErr := ps.detach()
	switch {
	case srcErr != nil && !errors.Is(srcErr, io.EOF):
		return minio.ObjectPart{}, 0, false, srcErr // the upload failed: nothing to send
	case err == nil:
		return part, n, srcErr != nil, nil
	case ctx.Err() != nil:
		return minio.ObjectPart{}, 0, false, ctx.Err()
	}
	// The last part, shorter; or the store failed the request: read the rest of the
	// part (nothing when the upload ended) and send it from memory.
	last := srcErr != nil
	if !last {
		k, err := io.ReadFull(r, buf[n:])
		n += k
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			last = true
		case err != nil:
			return minio.ObjectPart{}, 0, false, err
		}
	}
	part, err = o.putBufferedPart(ctx, key, uploadID, number, buf[:n])
	return part, n, last, err
}

// ignoreEOF is err, nil when it is io.EOF (the upload's end).
func ignoreEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

func crc32cBase64(sum uint32) string {
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, sum))
}
