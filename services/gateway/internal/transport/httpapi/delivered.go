package httpapi

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// What an answer through a link "sent", for the download budget, is what its client
// acknowledged where the gateway can tell (TCP_INFO's bytes acked, on Linux): bytes
// written into the socket but never delivered when the connection broke stay in the
// budget, so a client that resumes from the byte it got to is not refused. Behind a
// proxy the peer is the proxy, and what it acknowledged counts; elsewhere, what was
// written.

type connKey struct{}

// ConnContext is the http.Server's ConnContext of the public address: it puts the
// connection in each request's context, where the link routes read how many bytes its
// peer has acknowledged.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// WithConnContext sets ConnContext on a server.
func WithConnContext(s *http.Server) { s.ConnContext = ConnContext }

// deliveryMeter measures the bytes a request's peer acknowledges of what is written
// after it started. It holds a duplicate of the connection's descriptor, so it can
// still read the counts once net/http has closed a broken connection; close it.
type deliveryMeter struct {
	fd    int
	start int64 // the stream offset where the meter started
	ok    bool
}

// startDeliveryMeter starts measuring at what has been written to r's connection so
// far: call it with the answer's headers flushed, so it counts body bytes alone.
func startDeliveryMeter(r *http.Request) deliveryMeter {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	tcp, _ := c.(*net.TCPConn)
	if tcp == nil {
		return deliveryMeter{}
	}
	fd, ok := dupConn(tcp)
	if !ok {
		return deliveryMeter{}
	}
	n, ok := bytesWritten(fd)
	if !ok {
		closeFD(fd)
		return deliveryMeter{}
	}
	return deliveryMeter{fd: fd, start: n, ok: true}
}

// delivered bounds written, the bytes written since the start, by what the peer has
// acknowledged of them, and says whether the peer may still acknowledge more.
func (m deliveryMeter) delivered(written int64) (int64, bool) {
	if !m.ok {
		return written, false
	}
	n, alive, ok := bytesAcked(m.fd)
	if !ok {
		return written, false
	}
	return min(written, max(n-m.start, 0)), alive
}

// close lets go of the meter's descriptor.
func (m deliveryMeter) close() {
	if m.ok {
		closeFD(m.fd)
	}
}

// deliveryWait bounds how long an answer written whole waits for its client to
// acknowledge it before it counts as delivered.
const deliveryWait = time.Minute

// settleDelivery calls done with what the client acknowledged of the written bytes of
// an answer (all: every one), and closes the meter. An answer cut short (short) is
// settled at once: its connection broke, what was acknowledged is final. One written
// whole may still sit in socket buffers, on its way or lost with a connection that
// breaks now: it is settled in the background once the client acknowledged all of it
// (all), the connection broke (what was acknowledged), or deliveryWait passed (all:
// the budget errs on the side of counting). Without a meter, what was written counts.
func settleDelivery(m deliveryMeter, written int64, short bool, done func(delivered int64, all bool)) {
	if !m.ok {
		done(written, !short)
		return
	}
	if short {
		d, _ := m.delivered(written)
		m.close()
		done(d, false)
		return
	}
	go func() {
		defer m.close()
		deadline := time.Now().Add(deliveryWait)
		for wait := 2 * time.Millisecond; ; wait = min(2*wait, 250*time.Millisecond) {
			d, alive := m.delivered(written)
			switch {
			case d >= written || time.Now().After(deadline):
				done(written, true)
				return
			case !alive:
				done(d, false)
				return
			}
			time.Sleep(wait)
		}
	}()
}
