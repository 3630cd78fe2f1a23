package rig

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// Mail is one message an SMTPServer accepted.
type Mail struct {
	From string
	To   []string
	Data []byte
}

// SMTPServer is a real SMTP server (emersion/go-smtp) on a loopback port that records
// what it accepts and can go away (Stop: the port refuses connections, as a stopped
// server's would) and come back on the same port (Start).
type SMTPServer struct {
	t    testing.TB
	Host string
	Port string

	mu    sync.Mutex
	srv   *smtp.Server
	mails []Mail
}

// StartSMTP serves an SMTP server until the test ends.
func StartSMTP(t testing.TB) *SMTPServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &SMTPServer{t: t}
	s.Host, s.Port, _ = net.SplitHostPort(ln.Addr().String())
	s.serve(ln)
	t.Cleanup(s.Stop)
	return s
}

func (s *SMTPServer) serve(ln net.Listener) {
	srv := smtp.NewServer(smtpBackend{s})
	srv.Domain = "sink.test"
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// Stop closes the listener and every connection.
func (s *SMTPServer) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Start listens again on the same port.
func (s *SMTPServer) Start() {
	s.t.Helper()
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		if ln, err = net.Listen("tcp", net.JoinHostPort(s.Host, s.Port)); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("smtp: listen again: %v", err)
	}
	s.serve(ln)
}

// Mails returns what the server accepted so far.
func (s *SMTPServer) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

type smtpBackend struct{ s *SMTPServer }

func (b smtpBackend) NewSession(*smtp.Conn) (smtp.Session, error) { return &smtpSession{s: b.s}, nil }

type smtpSession struct {
	s    *SMTPServer
	from string
	to   []string
}

func (se *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	se.from = from
	return nil
}

func (se *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	se.to = append(se.to, to)
	return nil
}

func (se *smtpSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	se.s.mu.Lock()
	se.s.mails = append(se.s.mails, Mail{From: se.from, To: se.to, Data: data})
	se.s.mu.Unlock()
	return nil
}

func (se *smtpSession) Reset() { se.from, se.to = "", nil }

func (se *smtpSession) Logout() error { return nil }
