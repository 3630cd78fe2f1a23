package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	netmail "net/mail"
	"strconv"
	"strings"
	"time"

	"github.com/wneessen/go-mail"

	"github.com/shipfile/shipfile/services/mailer/internal/app"
)

// SMTP TLS modes (SHIPFILE_SMTP_TLS).
const (
	TLSNone     = "none"     // plain SMTP
	TLSStartTLS = "starttls" // STARTTLS, required: no e-mail goes out unencrypted
	TLSImplicit = "tls"      // TLS from the first byte (SMTPS, usually port 465)
)

// SMTPConfig is the SMTP part of the mailer's configuration.
type SMTPConfig struct {
	Host     string        `env:"SHIPFILE_SMTP_HOST" default:"127.0.0.1" help:"SMTP server host"`
	Port     int           `env:"SHIPFILE_SMTP_PORT" default:"1025" help:"SMTP server port"`
	From     string        `env:"SHIPFILE_SMTP_FROM" default:"shipfile@localhost" help:"sender of the e-mails: an address, or \"Name <address>\" (without a name, the owner's name is shown: \"Alice (via shipfile)\")"`
	Username string        `env:"SHIPFILE_SMTP_USERNAME" default:"" help:"SMTP user; when set, the mailer authenticates (the strongest mechanism the server offers; PLAIN without TLS only to localhost)"`
	Password string        `env:"SHIPFILE_SMTP_PASSWORD" default:"" secret:"true" help:"SMTP password"`
	TLS      string        `env:"SHIPFILE_SMTP_TLS" default:"none" help:"none, starttls (required: no e-mail goes out unencrypted) or tls (implicit TLS, e.g. port 465)"`
	Timeout  time.Duration `env:"SHIPFILE_SMTP_TIMEOUT" default:"30s" help:"time the SMTP server has for each step (connect, each command, the message)"`
}

// Validate checks the settings that have a fixed form.
func (c SMTPConfig) Validate() error {
	var errs []error
	switch c.TLS {
	case TLSNone, TLSStartTLS, TLSImplicit:
	default:
		errs = append(errs, fmt.Errorf("SHIPFILE_SMTP_TLS: %q is not none, starttls or tls", c.TLS))
	}
	if c.Host == "" {
		errs = append(errs, errors.New("SHIPFILE_SMTP_HOST is empty"))
	}
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("SHIPFILE_SMTP_PORT: %d is not a port", c.Port))
	}
	if _, err := netmail.ParseAddress(c.From); err != nil {
		errs = append(errs, fmt.Errorf("SHIPFILE_SMTP_FROM: %q is not an address: %v", c.From, err))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("SHIPFILE_SMTP_TIMEOUT must be positive"))
	}
	return errors.Join(errs...)
}

// SMTPOption adjusts an SMTP sender.
type SMTPOption func(*SMTP)

// WithRootCAs makes the sender trust these certificate authorities instead of the
// system's (tests with their own TLS server).
func WithRootCAs(pool *x509.CertPool) SMTPOption {
	return func(s *SMTP) { s.tls.RootCAs = pool }
}

// SMTP sends e-mails through one SMTP server with wneessen/go-mail, one connection per
// e-mail.
type SMTP struct {
	cfg  SMTPConfig
	from *netmail.Address
	tls  *tls.Config
}

var _ app.Sender = (*SMTP)(nil)

// NewSMTP returns a sender for cfg, which must be valid.
func NewSMTP(cfg SMTPConfig, opts ...SMTPOption) (*SMTP, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	from, err := netmail.ParseAddress(cfg.From)
	if err != nil {
		return nil, err
	}
	s := &SMTP{cfg: cfg, from: from, tls: &tls.Config{ServerName: cfg.Host, MinVersion: tls.VersionTLS12}}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// client returns a go-mail client set up as configured, whose every step has timeout.
func (s *SMTP) client(timeout time.Duration) (*mail.Client, error) {
	opts := []mail.Option{
		mail.WithPort(s.cfg.Port),
		mail.WithTimeout(timeout),
		mail.WithTLSConfig(s.tls),
	}
	switch s.cfg.TLS {
	case TLSNone:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	case TLSStartTLS:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	case TLSImplicit:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS), mail.WithSSL())
	}
	if s.cfg.Username != "" {
		auth := mail.SMTPAuthAutoDiscover
		if s.cfg.TLS == TLSNone {
			// Auto-discovery offers only challenge-response mechanisms on a plain
			// connection; PLAIN is what local relays speak, and go-mail sends it
			// unencrypted to localhost only.
			auth = mail.SMTPAuthPlain
		}
		opts = append(opts, mail.WithSMTPAuth(auth), mail.WithUsername(s.cfg.Username), mail.WithPassword(s.cfg.Password))
	}
	c, err := mail.NewClient(s.cfg.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("smtp: %w", err)
	}
	return c, nil
}

// Check reports whether the SMTP server answers and accepts the session: connect,
// EHLO, STARTTLS and authentication as configured, then QUIT.
func (s *SMTP) Check(ctx context.Context) error {
	timeout := s.cfg.Timeout
	if dl, ok := ctx.Deadline(); ok {
		// go-mail bounds only the dial by ctx; the session's steps by the timeout.
		timeout = min(timeout, max(time.Until(dl), time.Millisecond))
	}
	c, err := s.client(timeout)
	if err != nil {
		return err
	}
	if err := c.DialWithContext(ctx); err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	if err := c.Close(); err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	return nil
}

// Send sends e over a new connection and returns its Message-ID once the server has
// accepted it. A 5xx reply to RCPT TO or DATA (but 530) is an *app.Rejection;
// anything else that fails (no connection, a 4xx reply, TLS, authentication, MAIL FROM,
// a broken connection) is a transient error.
func (s *SMTP) Send(ctx context.Context, e app.Email) (string, error) {
	msg, err := s.Message(e)
	if err != nil {
		return "", &app.Rejection{Reply: "the e-mail cannot be built: " + err.Error()}
	}
	c, err := s.client(s.cfg.Timeout)
	if err != nil {
		return "", err
	}
	err = c.DialAndSendWithContext(ctx, msg)
	if msg.IsDelivered() {
		// Accepted; a failing RSET or QUIT afterwards changes nothing.
		return msg.GetMessageID(), nil
	}
	if err == nil {
		return "", errors.New("smtp: the server did not accept the e-mail")
	}
	var se *mail.SendError
	if errors.As(err, &se) && se.ErrorCode() != 0 {
		code := se.ErrorCode()
		reply := serverReply(se, code)
		if code >= 500 && code != 530 && aboutTheEmail(se.Reason) {
			return "", &app.Rejection{Code: code, Reply: reply}
		}
		return "", fmt.Errorf("smtp: %s answered %d %s", step(se.Reason), code, reply)
	}
	return "", fmt.Errorf("smtp: %w", err)
}

// Message builds the MIME message of e: From (the configured sender, named after the
// owner when it has no name), To, Reply-To (the owner), Subject, Date, a Message-ID
// derived from the job id, and a multipart/alternative body of the plain-text and HTML
// parts. Every header value goes through go-mail's encoding (RFC 2047 words for
// anything that is not printable ASCII, CR and LF included), so nothing in a name or a
// title can start a header of its own.
func (s *SMTP) Message(e app.Email) (*mail.Msg, error) {
	m := mail.NewMsg(mail.WithNoDefaultUserAgent())
	from := &netmail.Address{Name: s.from.Name, Address: s.from.Address}
	if from.Name == "" {
		from.Name = app.OneLine(e.SenderName)
	}
	m.SetAddrHeaderFromMailAddress(mail.HeaderFrom, from)
	to, err := netmail.ParseAddress(e.To.Address)
	if err != nil || to.Address != e.To.Address {
		return nil, fmt.Errorf("recipient address: %v", err)
	}
	to.Name = app.OneLine(e.To.Name)
	m.SetAddrHeaderFromMailAddress(mail.HeaderTo, to)
	if e.ReplyTo.Address != "" {
		if rt, err := netmail.ParseAddress(e.ReplyTo.Address); err == nil {
			rt.Name = app.OneLine(e.ReplyTo.Name)
			m.SetAddrHeaderFromMailAddress(mail.HeaderReplyTo, rt)
		}
	}
	m.Subject(app.OneLine(e.Subject))
	m.SetDate()
	m.SetMessageIDWithValue(e.JobID + "@" + domainOf(s.from.Address))
	// RFC 3834: an automatic message; out-of-office replies are not wanted.
	m.SetGenHeader(mail.Header("Auto-Submitted"), "auto-generated")
	if e.Language != "" {
		m.SetGenHeader(mail.Header("Content-Language"), e.Language)
	}
	m.SetGenHeader(mail.HeaderXAutoResponseSuppress, "All")
	m.SetBodyString(mail.TypeTextPlain, e.Text)
	m.AddAlternativeString(mail.TypeTextHTML, e.HTML)
	return m, nil
}

// aboutTheEmail reports whether a failure answered this e-mail's recipient (RCPT TO)
// or content (DATA): a 5xx there refuses the e-mail for good. Failures before (greeting,
// EHLO, STARTTLS, AUTH) and at MAIL FROM concern the sender or the session, the same for
// every e-mail (usually the configuration), and a 530 asks for authentication: those
// are retried on the schedule.
func aboutTheEmail(r mail.SendErrReason) bool {
	switch r {
	case mail.ErrSMTPRcptTo, mail.ErrSMTPData, mail.ErrSMTPDataClose:
		return true
	}
	return false
}

// step names the command a SendError failed at.
func step(r mail.SendErrReason) string {
	switch r {
	case mail.ErrSMTPMailFrom:
		return "MAIL FROM"
	case mail.ErrSMTPRcptTo:
		return "RCPT TO"
	case mail.ErrSMTPData:
		return "DATA"
	case mail.ErrSMTPDataClose:
		return "the end of DATA"
	case mail.ErrSMTPReset:
		return "RSET"
	case mail.ErrConnCheck:
		return "NOOP"
	}
	return r.String()
}

// serverReply extracts the server's reply text from a go-mail SendError, whose message
// is "<step>: <code> <text>[, …][, affected recipient(s): …][, affected message ID: …]",
// the text quoted (net/textproto quotes it since Go 1.26) or not.
func serverReply(se *mail.SendError, code int) string {
	msg := strings.TrimPrefix(se.Error(), se.Reason.String()+": ")
	msg = strings.TrimSpace(strings.TrimPrefix(msg, strconv.Itoa(code)))
	if q, err := strconv.QuotedPrefix(msg); err == nil {
		if text, err := strconv.Unquote(q); err == nil {
			return app.OneLine(text)
		}
	}
	for _, tail := range []string{", affected recipient(s): ", ", affected message ID: "} {
		if i := strings.Index(msg, tail); i >= 0 {
			msg = msg[:i]
		}
	}
	return app.OneLine(msg)
}

func domainOf(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 && i < len(addr)-1 {
		return addr[i+1:]
	}
	return "localhost"
}
