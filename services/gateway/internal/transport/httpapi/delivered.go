package httpapi

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
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
// acknowledged of them.
func (m deliveryMeter) delivered(written int64) int64 {
	if !m.ok {
		return written
	}
	n, ok := bytesAcked(m.fd)
	if !ok {
		return written
	}
	return min(written, max(n-m.start, 0))
}

// close lets go of the meter's descriptor.
func (m deliveryMeter) close() {
	if m.ok {
		closeFD(m.fd)
	}
}
