// Package mailtest helps the mailer's tests: Sink is a real SMTP server
// (emersion/go-smtp) on 127.0.0.1 that records what it receives and can be told to
// refuse (421/451 for a while, 550 for a recipient), to require AUTH or TLS, or to go
// away and come back on the same port; Start runs a mailer instance wired like the
// binary's on a private NATS server; helpers read the mailer's tables.
package mailtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Stage is the SMTP command a Policy answers.
type Stage string

// Stages a Policy sees.
const (
	StageMail Stage = "MAIL" // arg: the envelope sender
	StageRcpt Stage = "RCPT" // arg: the recipient
	StageData Stage = "DATA" // arg: "" (after the message was read)
)

// Policy decides the answer to a command: nil accepts, an *smtp.SMTPError refuses.
type Policy func(stage Stage, arg string) *smtp.SMTPError

// Message is one e-mail the sink accepted.
type Message struct {
	From string   // MAIL FROM
	To   []string // RCPT TO
	Data []byte   // the message as received
	At   time.Time
}

// Sink is a real SMTP server for tests.
type Sink struct {
	// Addr is host:port; Host and Port are its parts.
	Addr string
	Host string
	Port int

	opts sinkOptions

	mu       sync.Mutex
	srv      *smtp.Server
	policy   Policy
	messages []Message
	sessions int // connections that said EHLO
	mails    int // MAIL FROM commands (transactions begun)
}

type sinkOptions struct {
	user, pass string
	cert       *tls.Certificate
	implicit   bool
}

// SinkOption configures a Sink.
type SinkOption func(*sinkOptions)

// WithAuth makes the sink offer AUTH PLAIN and require these credentials before MAIL.
func WithAuth(user, pass string) SinkOption {
	return func(o *sinkOptions) { o.user, o.pass = user, pass }
}

// WithTLS makes the sink speak TLS with cert: STARTTLS, or from the first byte when
// implicit.
func WithTLS(cert tls.Certificate, implicit bool) SinkOption {
	return func(o *sinkOptions) { o.cert, o.implicit = &cert, implicit }
}

// NewSink starts a sink on a free 127.0.0.1 port, closed when the test ends.
func NewSink(t testing.TB, opts ...SinkOption) *Sink {
	t.Helper()
	s := &Sink{}
	for _, o := range opts {
		o(&s.opts)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = ln.Addr().String()
	s.Host = "127.0.0.1"
	s.Port = ln.Addr().(*net.TCPAddr).Port
	s.serve(ln)
	t.Cleanup(s.Down)
	return s
}

func (s *Sink) serve(ln net.Listener) {
	srv := smtp.NewServer(backend{s})
	srv.Domain = "sink.test"
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.AllowInsecureAuth = true
	if s.opts.cert != nil {
		cfg := &tls.Config{Certificates: []tls.Certificate{*s.opts.cert}, MinVersion: tls.VersionTLS12}
		if s.opts.implicit {
			ln = tls.NewListener(ln, cfg)
		} else {
			srv.TLSConfig = cfg
		}
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go srv.Serve(ln) //nolint:errcheck // ends with Close
}

// Down closes the sink: connections are refused until Up.
func (s *Sink) Down() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Up listens again on the sink's port after Down.
func (s *Sink) Up(t testing.TB) {
	t.Helper()
	var ln net.Listener
	var err error
	// The port was just released; binding it again can take a moment.
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err = net.Listen("tcp", s.Addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("sink: listen again on %s: %v", s.Addr, err)
	}
	s.serve(ln)
}

// SetPolicy sets how the sink answers from now on (nil: accept everything).
func (s *Sink) SetPolicy(p Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policy = p
}

// Messages returns the accepted e-mails, in order.
func (s *Sink) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// Transactions returns how many MAIL FROM commands the sink saw (attempts that got
// that far), accepted or not.
func (s *Sink) Transactions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mails
}

// WaitN waits until the sink has accepted at least n e-mails and returns them.
func (s *Sink) WaitN(t testing.TB, n int, within time.Duration) []Message {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if m := s.Messages(); len(m) >= n {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("sink: %d e-mails after %s, want %d", len(s.Messages()), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Sink) answer(stage Stage, arg string) error {
	s.mu.Lock()
	p := s.policy
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	if e := p(stage, arg); e != nil {
		return e
	}
	return nil
}

// Refuse returns an SMTP error with code, enhanced code and text.
func Refuse(code int, enhanced [3]int, text string) *smtp.SMTPError {
	return &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode(enhanced), Message: text}
}

type backend struct{ s *Sink }

func (b backend) NewSession(*smtp.Conn) (smtp.Session, error) {
	b.s.mu.Lock()
	b.s.sessions++
	b.s.mu.Unlock()
	return &session{s: b.s}, nil
}

type session struct {
	s      *Sink
	authed bool
	from   string
	to     []string
}

var _ smtp.AuthSession = (*session)(nil)

func (se *session) AuthMechanisms() []string {
	if se.s.opts.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (se *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != se.s.opts.user || pass != se.s.opts.pass {
			return Refuse(535, [3]int{5, 7, 8}, "authentication failed")
		}
		se.authed = true
		return nil
	}), nil
}

func (se *session) Mail(from string, _ *smtp.MailOptions) error {
	se.s.mu.Lock()
	se.s.mails++
	se.s.mu.Unlock()
	if se.s.opts.user != "" && !se.authed {
		return Refuse(530, [3]int{5, 7, 0}, "authentication required")
	}
	if err := se.s.answer(StageMail, from); err != nil {
		return err
	}
	se.from = from
	return nil
}

func (se *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err := se.s.answer(StageRcpt, to); err != nil {
		return err
	}
	se.to = append(se.to, to)
	return nil
}

func (se *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if err := se.s.answer(StageData, ""); err != nil {
		return err
	}
	se.s.mu.Lock()
	se.s.messages = append(se.s.messages, Message{From: se.from, To: append([]string(nil), se.to...), Data: data, At: time.Now()})
	se.s.mu.Unlock()
	return nil
}

func (se *session) Reset()        { se.from, se.to = "", nil }
func (se *session) Logout() error { return nil }

// Parsed is an e-mail taken apart: its header and its decoded text parts.
type Parsed struct {
	Header mail.Header
	// Subject is the decoded Subject header.
	Subject string
	// ContentType is the top-level media type, e.g. "multipart/alternative".
	ContentType string
	// Parts are the decoded bodies by media type ("text/plain", "text/html"), in order.
	Parts     map[string]string
	PartOrder []string
}

// Parse takes m apart: the header, the multipart/alternative body's parts decoded from
// their transfer encoding.
func (m Message) Parse(t testing.TB) Parsed {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		t.Fatalf("parse e-mail: %v\n%s", err, m.Data)
	}
	p := Parsed{Header: msg.Header, Parts: map[string]string{}}
	dec := new(mime.WordDecoder)
	if p.Subject, err = dec.DecodeHeader(msg.Header.Get("Subject")); err != nil {
		t.Fatalf("decode subject %q: %v", msg.Header.Get("Subject"), err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatalf("Content-Type %q: %v", msg.Header.Get("Content-Type"), err)
	}
	p.ContentType = mt
	if !strings.HasPrefix(mt, "multipart/") {
		p.Parts[mt] = decodeBody(t, msg.Header.Get("Content-Transfer-Encoding"), msg.Body)
		p.PartOrder = append(p.PartOrder, mt)
		return p
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("multipart: %v", err)
		}
		pt, _, err := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if err != nil {
			t.Fatalf("part Content-Type %q: %v", part.Header.Get("Content-Type"), err)
		}
		p.Parts[pt] = decodeBody(t, part.Header.Get("Content-Transfer-Encoding"), part)
		p.PartOrder = append(p.PartOrder, pt)
	}
	return p
}

func decodeBody(t testing.TB, cte string, r io.Reader) string {
	t.Helper()
	switch strings.ToLower(cte) {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		t.Fatal("mailtest: base64 bodies are not expected")
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read part: %v", err)
	}
	return strings.ReplaceAll(string(b), "\r\n", "\n")
}

// SelfSigned returns a certificate for 127.0.0.1 and a pool that trusts it.
func SelfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sink.test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
