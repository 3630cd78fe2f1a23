// Package transport is the scanner's way in and out: the JetStream consumer of
// package.file_uploaded, and the clamd client (INSTREAM over TCP or a Unix socket).
package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/shipfile/shipfile/pkg/clip"
	"github.com/shipfile/shipfile/services/scanner/internal/app"
)

// ClamdConfig tunes the clamd client.
type ClamdConfig struct {
	// Addr is clamd's address: host:port or tcp://host:port, or a Unix socket as
	// unix:/path or /path.
	Addr string
	// ChunkSize is the size of one INSTREAM chunk (default 256 KiB); a scan holds two,
	// one read ahead while the other is sent.
	ChunkSize int
	// DialTimeout bounds connecting (default 5s).
	DialTimeout time.Duration
	// Timeout bounds each write of a chunk, and the wait for the verdict after the last
	// one (clamd scans while it receives; what is left after the end of the stream).
	// No verdict in that time while clamd answers PING is a failed scan of this file
	// (app.ScanFailedError), counted toward its attempts; without a PONG, clamd is
	// taken for down (app.ErrClamdUnavailable) and the file waits.
	Timeout time.Duration
}

// Clamd talks to clamd: one connection per scan (clamd handles them in its threads),
// chunks written from two buffers per scan.
type Clamd struct {
	network, addr string
	cfg           ClamdConfig
	bufs          sync.Pool
}

var _ app.Clamd = (*Clamd)(nil)

// NewClamd returns a client of cfg.Addr.
func NewClamd(cfg ClamdConfig) (*Clamd, error) {
	network, addr, err := ParseClamdAddr(cfg.Addr)
	if err != nil {
		return nil, err
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = 256 << 10
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	c := &Clamd{network: network, addr: addr, cfg: cfg}
	c.bufs.New = func() any { b := make([]byte, 4+cfg.ChunkSize); return &b }
	return c, nil
}

// ParseClamdAddr reads SHIPFILE_CLAMD_ADDR: host:port, tcp://host:port, unix:/path or
// /path.
func ParseClamdAddr(s string) (network, addr string, err error) {
	switch {
	case strings.HasPrefix(s, "unix://"):
		return "unix", strings.TrimPrefix(s, "unix://"), nil
	case strings.HasPrefix(s, "unix:"):
		return "unix", strings.TrimPrefix(s, "unix:"), nil
	case strings.HasPrefix(s, "/"):
		return "unix", s, nil
	}
	hp := strings.TrimPrefix(s, "tcp://")
	if _, _, err := net.SplitHostPort(hp); err != nil || hp == "" {
		return "", "", fmt.Errorf("SHIPFILE_CLAMD_ADDR %q: want host:port, tcp://host:port, unix:/path or /path", s)
	}
	return "tcp", hp, nil
}

func (c *Clamd) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: c.cfg.DialTimeout}
	conn, err := d.DialContext(ctx, c.network, c.addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", app.ErrClamdUnavailable, err)
	}
	return conn, nil
}

// Ping checks that clamd answers PING with PONG (readiness).
func (c *Clamd) Ping(ctx context.Context) error {
	conn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(c.cfg.DialTimeout))
	if _, err := conn.Write([]byte("zPING\x00")); err != nil {
		return fmt.Errorf("%w: %w", app.ErrClamdUnavailable, err)
	}
	reply, err := readReply(conn)
	if err != nil {
		return fmt.Errorf("%w: %w", app.ErrClamdUnavailable, err)
	}
	if reply != "PONG" {
		return fmt.Errorf("clamd answered PING with %q", reply)
	}
	return nil
}

// errSource marks a failure to read the stream being scanned (the object store), so it
// is not taken for clamd's.
type errSource struct{ err error }

func (e errSource) Error() string { return "reading the object: " + e.err.Error() }
func (e errSource) Unwrap() error { return e.err }

// Scan streams r to clamd with INSTREAM: each chunk is a 4-byte big-endian length and
// the bytes, a zero length ends the stream, and clamd answers "stream: OK", "stream:
// <signature> FOUND" or "<reason> ERROR". The next chunk is read from r while the last
// one goes to clamd, so the object store and clamd work at once. Memory: two chunk
// buffers, whatever r's size.
func (c *Clamd) Scan(ctx context.Context, r io.Reader) (string, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	// A cancelled context ends the scan at once.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	_ = conn.SetWriteDeadline(time.Now().Add(c.cfg.Timeout))
	if _, err := conn.Write([]byte("zINSTREAM\x00")); err != nil {
		return "", c.connErr(ctx, conn, err)
	}
	chunks, done := c.prefetch(r)
	defer close(done)
	for ch := range chunks {
		if ch.n > 0 {
			binary.BigEndian.PutUint32(ch.buf[:4], uint32(ch.n))
			_ = conn.SetWriteDeadline(time.Now().Add(c.cfg.Timeout))
			if _, err := conn.Write(ch.buf[:4+ch.n]); err != nil {
				return "", c.connErr(ctx, conn, err)
			}
		}
		if errors.Is(ch.err, io.EOF) || errors.Is(ch.err, io.ErrUnexpectedEOF) {
			break
		}
		if ch.err != nil {
			return "", errSource{ch.err}
		}
		ch.release()
	}
	_ = conn.SetWriteDeadline(time.Now().Add(c.cfg.Timeout))
	if _, err := conn.Write([]byte{0, 0, 0, 0}); err != nil {
		return "", c.connErr(ctx, conn, err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(c.cfg.Timeout))
	reply, err := readReply(conn)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && c.Ping(ctx) == nil {
			// clamd is up and answers others, but has not judged this stream in time
			// (a file that makes it scan for too long): the file is unscannable, not a
			// wait for clamd that would keep it pending for ever.
			return "", &app.UnscannableError{Reason: fmt.Sprintf("no verdict within %s", c.cfg.Timeout)}
		}
		return "", fmt.Errorf("%w: no verdict: %w", app.ErrClamdUnavailable, err)
	}
	return parseReply(reply)
}

// chunk is one read of the stream being scanned, in buf[4:4+n] (buf[:4] is left for the
// length); err is what the read ended with.
type chunk struct {
	buf     []byte
	n       int
	err     error
	release func() // hands buf back for the next read
}

// prefetch reads r in chunks into two buffers, one ahead of the chunk being sent. It
// stops at the end of r, or when done is closed (the scan ended; the caller then closes
// the object, which ends a read in progress); the buffers go back to the pool once it
// has stopped.
func (c *Clamd) prefetch(r io.Reader) (<-chan chunk, chan struct{}) {
	out := make(chan chunk)
	done := make(chan struct{})
	free := make(chan []byte, 2)
	a, b := c.bufs.Get().(*[]byte), c.bufs.Get().(*[]byte)
	free <- *a
	free <- *b
	go func() {
		defer func() { c.bufs.Put(a); c.bufs.Put(b) }()
		defer close(out)
		for {
			var buf []byte
			select {
			case buf = <-free:
			case <-done:
				return
			}
			n, err := io.ReadFull(r, buf[4:])
			ch := chunk{buf: buf, n: n, err: err, release: func() { free <- buf }}
			select {
			case out <- ch:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out, done
}

// connErr is the error of a write to clamd that failed: clamd may have closed the
// stream with an answer of its own (a size limit), which is read when there is one.
func (c *Clamd) connErr(ctx context.Context, conn net.Conn, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	if reply, rerr := readReply(conn); rerr == nil && reply != "" {
		if _, perr := parseReply(reply); perr != nil {
			return perr
		}
	}
	return fmt.Errorf("%w: %w", app.ErrClamdUnavailable, err)
}

// readReply reads one NUL-terminated answer (at most 4 KiB).
func readReply(conn net.Conn) (string, error) {
	br := bufio.NewReaderSize(io.LimitReader(conn, 4096), 512)
	b, err := br.ReadBytes(0)
	if err != nil && !(errors.Is(err, io.EOF) && len(b) > 0) {
		return "", err
	}
	return string(bytes.TrimRight(b, "\x00\n")), nil
}

// parseReply reads INSTREAM's answer: "" for clean, the name of what clamd found
// (app.Judge tells malware from what it could not judge), an *app.UnscannableError for
// a stream over clamd's StreamMaxLength, a *app.ScanFailedError for another ERROR.
func parseReply(reply string) (string, error) {
	body := strings.TrimPrefix(reply, "stream: ")
	switch {
	case strings.HasPrefix(body, "INSTREAM size limit exceeded"):
		return "", &app.UnscannableError{Reason: "clamd: " + strings.TrimSuffix(body, " ERROR")}
	case body == "OK":
		return "", nil
	case strings.HasSuffix(body, " FOUND"):
		sig := strings.TrimSpace(strings.TrimSuffix(body, " FOUND"))
		if sig == "" {
			sig = "unknown"
		}
		return sig, nil
	case strings.HasSuffix(body, " ERROR"):
		return "", &app.ScanFailedError{Reply: strings.TrimSuffix(body, " ERROR")}
	default:
		return "", &app.ScanFailedError{Reply: "unexpected answer: " + clip.Bytes(reply, 200)}
	}
}
